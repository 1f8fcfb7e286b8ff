import sys, re
src, dst, val = sys.argv[1], sys.argv[2], sys.argv[3]
lines = open(src).read().split("\n")
n = 0
for i, l in enumerate(lines):
    if re.search(r"\bscf\.for\b", l) and not l.lstrip().startswith("//"):
        ind = len(l) - len(l.lstrip())
        for j in range(i + 1, len(lines)):
            m = lines[j]
            if len(m) - len(m.lstrip()) == ind and m.lstrip().startswith("}"):
                lines[j] = " " * ind + "} {tt.num_stages = %s : i32}" % val + m.lstrip()[1:]
                n += 1
                break
open(dst, "w").write("\n".join(lines)); print("marked", n)

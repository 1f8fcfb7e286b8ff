//! Input errors with a location.
//!
//! Every malformed or inconsistent input (graph or machine description) is
//! reported as a [`LoadError`]: the file, the 1-based line and column, the
//! dotted field path that is wrong (`op[2].cycles`, `edge[0].to`, ...) and a
//! message. The CLI prints it as `file:line:col: field: message` and exits 2.

use std::fmt;
use std::ops::Range;

/// An error in a user-supplied description file, with its location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// File name (or `<input>` for in-memory text).
    pub file: String,
    /// 1-based line, 0 when unknown.
    pub line: usize,
    /// 1-based column, 0 when unknown.
    pub column: usize,
    /// Dotted path of the offending field, empty when the whole file is at fault.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for LoadError {}

/// Maps byte offsets of a source text to 1-based (line, column).
#[derive(Debug, Clone)]
pub struct SourceMap {
    file: String,
    line_starts: Vec<usize>,
}

impl SourceMap {
    /// Indexes `text`, to be reported under the name `file`.
    pub fn new(file: &str, text: &str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        SourceMap {
            file: file.to_string(),
            line_starts,
        }
    }

    /// The file name errors are reported under.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// 1-based line and column of a byte offset.
    pub fn position(&self, offset: usize) -> (usize, usize) {
        let line = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        (line + 1, offset - self.line_starts[line] + 1)
    }

    /// An error located at the start of `span`.
    pub fn error(
        &self,
        span: Option<Range<usize>>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> LoadError {
        let (line, column) = span.map(|s| self.position(s.start)).unwrap_or((0, 0));
        LoadError {
            file: self.file.clone(),
            line,
            column,
            field: field.into(),
            message: message.into(),
        }
    }

    /// Converts a TOML syntax or type error into a located [`LoadError`].
    pub fn toml_error(&self, err: &toml::de::Error) -> LoadError {
        let message = err.message().trim().to_string();
        self.error(err.span(), "", message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based() {
        let map = SourceMap::new("f", "ab\ncd\n\nx");
        assert_eq!(map.position(0), (1, 1));
        assert_eq!(map.position(1), (1, 2));
        assert_eq!(map.position(3), (2, 1));
        assert_eq!(map.position(6), (3, 1));
        assert_eq!(map.position(7), (4, 1));
    }

    #[test]
    fn display_names_file_line_field() {
        let map = SourceMap::new("g.toml", "a\nb = 1\n");
        let e = map.error(Some(2..3), "op[0].cycles", "must be >= 0");
        assert_eq!(e.to_string(), "g.toml:2:1: op[0].cycles: must be >= 0");
    }
}

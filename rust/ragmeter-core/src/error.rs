//! One error type for the whole core. The Python binding maps each variant to a
//! typed exception; nothing in the core panics on user input.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// A file could not be opened or read.
    Io { path: String, message: String },
    /// A line of an input file is malformed (`path:line: message`).
    Parse { path: String, line: usize, message: String },
    /// An input is well-formed but unusable (empty file, inconsistent arrays…).
    Input { message: String },
    /// A measure name or its parameters are not understood.
    Measure { message: String },
}

impl Error {
    pub fn parse(path: &str, line: usize, message: impl Into<String>) -> Self {
        Error::Parse { path: path.to_string(), line, message: message.into() }
    }
    pub fn input(message: impl Into<String>) -> Self {
        Error::Input { message: message.into() }
    }
    pub fn measure(message: impl Into<String>) -> Self {
        Error::Measure { message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, message } => write!(f, "{path}: {message}"),
            Error::Parse { path, line, message } => write!(f, "{path}:{line}: {message}"),
            Error::Input { message } | Error::Measure { message } => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

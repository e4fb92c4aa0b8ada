//! Every way a `closest` job can fail, and the exit code each maps to (SPEC §5).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A shape in a scene is invalid: unknown type, missing or non-finite field, negative size…
    #[error("{file}: shape {index}: field `{field}`: {problem}")]
    BadShape {
        file: String,
        index: usize,
        field: String,
        problem: String,
    },
    /// A row of a points file is invalid (unparsable CSV cell, wrong column count…).
    #[error("{file}: row {row}: {field}: {problem}")]
    BadRow {
        file: String,
        row: usize,
        field: String,
        problem: String,
    },
    /// A whole input file is malformed (bad JSON, wrong .npy shape or dtype, unknown extension…).
    #[error("{file}: {problem}")]
    BadFile { file: String, problem: String },
    /// An input file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// An output file cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The command line is inconsistent (e.g. `--paired` with different counts).
    #[error("{0}")]
    Usage(String),
    /// No adapter could be found or opened (the message says what to install where that is
    /// the remedy: [`Error::no_adapter`]).
    #[error("no usable GPU adapter: {0}")]
    NoAdapter(String),
    /// The device reported a validation error, ran out of memory or was lost.
    #[error("GPU error: {0}")]
    Gpu(String),
    /// The job needs more memory than the machine has available; refused before the long
    /// work starts, with the sizes named.
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// The caller's interrupt check stopped the job (`interrupt::checking_interrupts`).
    #[error("interrupted")]
    Interrupted,
}

impl Error {
    /// The process exit code for this error (SPEC §5): 2 bad input, 3 no adapter, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::BadShape { .. }
            | Error::BadRow { .. }
            | Error::BadFile { .. }
            | Error::Read { .. }
            | Error::Write { .. }
            | Error::Usage(_) => 2,
            Error::NoAdapter(_) => 3,
            Error::Gpu(_) | Error::OutOfMemory(_) => 1,
            // As a shell reports a process ended by SIGINT.
            Error::Interrupted => 130,
        }
    }
}

impl Error {
    /// No adapter at all, or none that opens: the message ends with what to install.
    pub fn no_adapter(detail: impl std::fmt::Display) -> Error {
        Error::NoAdapter(format!(
            "{detail}\n\
             To run on the CPU, install Mesa's software Vulkan driver (lavapipe): \
             `sudo apt-get install -y mesa-vulkan-drivers` on Debian/Ubuntu, \
             `sudo dnf install mesa-vulkan-drivers` on Fedora; then check with `closest info`."
        ))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `message` with each of the CLI's flags among `arguments` (given with underscores) written
/// as that argument's name: `--band-units 2` → `band_units 2`. The engine's messages name the
/// CLI's flags; Python's keyword arguments and the service's query parameters are named so.
pub fn flags_as_arguments(message: &str, arguments: &[&str]) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("--") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let flag_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(after.len());
        let argument = after[..flag_len].replace('-', "_");
        // A flag starts a word: `/tmp/a--pad.obj` is a file's name.
        let starts_word = out
            .chars()
            .next_back()
            .is_none_or(|c| c.is_whitespace() || "(`[,".contains(c));
        // And ends one: `my --pad.obj` and `--pad/x` are names too; `--pad.` ends a sentence.
        let tail = &after[flag_len..];
        let in_name = tail.starts_with('/')
            || tail.starts_with('.') && tail[1..].starts_with(|c: char| c.is_alphanumeric());
        if starts_word && !in_name && arguments.contains(&argument.as_str()) {
            out.push_str(&argument);
        } else {
            out.push_str(&rest[at..at + 2 + flag_len]);
        }
        rest = &after[flag_len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::flags_as_arguments;

    #[test]
    fn flags_are_named_as_the_callers_arguments() {
        let named = |m| flags_as_arguments(m, &["pad", "band_units"]);
        assert_eq!(
            named("--pad must be ≥ 0; give a smaller --pad"),
            "pad must be ≥ 0; give a smaller pad"
        );
        assert_eq!(
            named("--band-units world, --band 2"),
            "band_units world, --band 2"
        );
        // Only whole flags: `--padding` is not `--pad`.
        assert_eq!(
            named("--padding --max-grid-samples"),
            "--padding --max-grid-samples"
        );
        assert_eq!(named("a -- b --"), "a -- b --");
        assert_eq!(named("/tmp/a--pad.obj: (--pad)"), "/tmp/a--pad.obj: (pad)");
        assert_eq!(named("my --pad.obj: no --pad."), "my --pad.obj: no pad.");
        assert_eq!(named("in --pad/x.obj"), "in --pad/x.obj");
    }
}

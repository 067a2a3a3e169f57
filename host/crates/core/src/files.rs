//! Opening the files users point decoy at (`bodyFileName`, `__files` as a web root)
//! so that a wrong kind of file is refused with a reason instead of hanging or
//! filling memory.
//!
//! Only regular files are read. Opening a FIFO for reading blocks until someone
//! writes to it, and a device such as `/dev/zero` never ends: either would hold a
//! thread (or the whole load) forever. So [`open_regular`] checks the kind before
//! opening (opening some devices has effects of its own), opens without blocking,
//! and checks again on what was opened, in case the name was swapped in between.
//! [`read_limited`] then reads at most a given number of bytes, even if the file
//! grows after its size was looked at.

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read as _;
use std::path::Path;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("it is {0}, not a regular file")]
    NotRegular(&'static str),
    #[error("it is {size} bytes, more than the limit of {limit} bytes")]
    TooLarge { size: u64, limit: u64 },
}

/// `path` opened for reading, with its metadata, when it is a regular file (links
/// followed). Never blocks on a FIFO.
pub fn open_regular(path: &Path) -> Result<(File, Metadata), FileError> {
    check_kind(&std::fs::metadata(path)?)?;
    let mut opts = OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        // Has no effect on a regular file's reads; keeps the open itself from
        // waiting for a writer should the name now be a FIFO.
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let file = opts.open(path)?;
    let meta = file.metadata()?;
    check_kind(&meta)?;
    Ok((file, meta))
}

/// The whole of the regular file `path`, refused when it is larger than `limit`
/// bytes.
pub fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let (file, meta) = open_regular(path)?;
    if meta.len() > limit {
        return Err(FileError::TooLarge {
            size: meta.len(),
            limit,
        });
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    // One byte past the limit tells a file that grew since `metadata` from one that
    // is exactly at the limit.
    file.take(limit.saturating_add(1)).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(FileError::TooLarge {
            size: out.len() as u64,
            limit,
        });
    }
    Ok(out)
}

fn check_kind(meta: &Metadata) -> Result<(), FileError> {
    if meta.is_file() {
        return Ok(());
    }
    Err(FileError::NotRegular(kind(meta)))
}

/// What a file that is not a regular file is, in words.
fn kind(meta: &Metadata) -> &'static str {
    let ft = meta.file_type();
    if ft.is_dir() {
        return "a folder";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if ft.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if ft.is_char_device() || ft.is_block_device() {
            return "a device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    "a special file"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_read_up_to_the_limit_and_refused_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, "12345").unwrap();
        assert_eq!(read_limited(&f, 5).unwrap(), b"12345");
        let err = read_limited(&f, 4).unwrap_err();
        assert_eq!(
            err.to_string(),
            "it is 5 bytes, more than the limit of 4 bytes"
        );
    }

    #[test]
    fn a_folder_or_a_device_is_refused_without_reading() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_limited(dir.path(), 1 << 20).unwrap_err();
        assert_eq!(err.to_string(), "it is a folder, not a regular file");
        #[cfg(unix)]
        {
            let err = read_limited(Path::new("/dev/zero"), 1 << 20).unwrap_err();
            assert_eq!(err.to_string(), "it is a device, not a regular file");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_at_once_instead_of_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // With no writer, a plain open would never return.
        let err = read_limited(&fifo, 1 << 20).unwrap_err();
        assert_eq!(
            err.to_string(),
            "it is a FIFO (named pipe), not a regular file"
        );
    }
}

//! Errors: a gf_status and the message gf_last_error() gave on the calling thread.
use gpuflow_sys as sys;
use std::ffi::CStr;
use std::fmt;

/// A gf_status value (GF_OK, GF_TIMEOUT or a negative error).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Status(pub i32);

impl Status {
    pub const OK: Status = Status(sys::GF_OK);
    pub const TIMEOUT: Status = Status(sys::GF_TIMEOUT);
    pub const INVALID_ARGUMENT: Status = Status(sys::GF_ERR_INVALID_ARGUMENT);
    pub const INVALID_HANDLE: Status = Status(sys::GF_ERR_INVALID_HANDLE);
    pub const STRUCT_SIZE: Status = Status(sys::GF_ERR_STRUCT_SIZE);
    pub const VERSION_MISMATCH: Status = Status(sys::GF_ERR_VERSION_MISMATCH);
    pub const INVALID_GRAPH: Status = Status(sys::GF_ERR_INVALID_GRAPH);
    pub const INFEASIBLE: Status = Status(sys::GF_ERR_INFEASIBLE);
    pub const OUT_OF_MEMORY: Status = Status(sys::GF_ERR_OUT_OF_MEMORY);
    pub const TASK_FAILED: Status = Status(sys::GF_ERR_TASK_FAILED);
    pub const CANCELLED: Status = Status(sys::GF_ERR_CANCELLED);
    pub const STATE: Status = Status(sys::GF_ERR_STATE);
    pub const NOT_FOUND: Status = Status(sys::GF_ERR_NOT_FOUND);
    pub const SHUT_DOWN: Status = Status(sys::GF_ERR_SHUT_DOWN);
    pub const SYSTEM: Status = Status(sys::GF_ERR_SYSTEM);
    pub const INTERNAL: Status = Status(sys::GF_ERR_INTERNAL);

    /// The constant's name, "GF_ERR_INFEASIBLE".
    pub fn name(self) -> &'static str {
        // SAFETY: gf_status_name returns static storage for any value.
        unsafe { CStr::from_ptr(sys::gf_status_name(self.0)) }
            .to_str()
            .unwrap_or("GF_?")
    }
}

/// A failed gpuflow call: its status and the library's message naming the culprit.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    /// An error the binding itself detects before calling the library.
    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::new(Status::INVALID_ARGUMENT, message)
    }
}

/// The message of the last failed call on this thread.
pub(crate) fn last_error() -> String {
    // SAFETY: never NULL; valid until the next gpuflow call on this thread, copied at once.
    unsafe { CStr::from_ptr(sys::gf_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// Ok for GF_OK, else the status with gf_last_error().
pub(crate) fn check(status: sys::gf_status) -> Result<()> {
    if status == sys::GF_OK {
        Ok(())
    } else {
        Err(Error::new(Status(status), last_error()))
    }
}

/// A C string for a name given by the caller; an interior NUL is an error naming `what`.
pub(crate) fn c_string(s: &str, what: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(s).map_err(|_| Error::invalid(format!("{what} contains a NUL byte")))
}

/// Lets a task body, which fails with a message, use `?` on the crate's calls.
impl From<Error> for String {
    fn from(e: Error) -> String {
        e.to_string()
    }
}

//! External commands as task bodies (gf_command_desc): the task runs a child process on the
//! worker that runs it, with the device it was given in CUDA_VISIBLE_DEVICES and its output in
//! log files (gpuflow.h, "External commands"). Exit status 0 is success.
//!
//! ```
//! use gpuflow::{Command, Graph, Pool, PoolConfig};
//! let pool = Pool::new(&PoolConfig::host(1, 0, 0))?;
//! let mut graph = Graph::new()?;
//! graph.task("ok").command(Command::new(["true"])).add()?;
//! graph.submit(&pool)?.wait()?;
//! # Ok::<(), gpuflow::Error>(())
//! ```
use crate::error::{c_string, Error, Result};
use crate::pool::{path_c_string, ptr_or_null};
use gpuflow_sys as sys;
use std::ffi::CString;
use std::mem::size_of;
use std::os::raw::c_char;
use std::path::PathBuf;
use std::ptr;
use std::time::Duration;

/// A command line to run as a task's body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Command {
    /// argv[0] is searched in PATH.
    pub argv: Vec<String>,
    /// Added to the inherited environment.
    pub env: Vec<(String, String)>,
    /// None: the pool process's working directory.
    pub working_dir: Option<PathBuf>,
    /// Per attempt; None: no limit. On timeout its process group gets SIGTERM, then SIGKILL.
    pub timeout: Option<Duration>,
    /// Where <run>/<task>.out and .err go; None: $GPUFLOW_LOG_DIR, else
    /// ${TMPDIR:-/tmp}/gpuflow-logs.
    pub log_dir: Option<PathBuf>,
}

impl Command {
    pub fn new<I, S>(argv: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Command {
            argv: argv.into_iter().map(Into::into).collect(),
            ..Command::default()
        }
    }

    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    pub fn working_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.working_dir = Some(dir.into());
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    pub fn log_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.log_dir = Some(dir.into());
        self
    }
}

/// The C view of a Command and the strings it points into, alive together.
pub(crate) struct CCommand {
    _strings: Vec<CString>,
    _argv: Vec<*const c_char>,
    _env: Vec<*const c_char>,
    pub desc: sys::gf_command_desc,
}

fn count(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::invalid(format!("too many {what}")))
}

impl CCommand {
    pub(crate) fn new(c: &Command) -> Result<CCommand> {
        let mut strings = Vec::new();
        let argv: Vec<CString> = c
            .argv
            .iter()
            .map(|a| c_string(a, "a command argument"))
            .collect::<Result<_>>()?;
        let env: Vec<CString> = c
            .env
            .iter()
            .map(|(n, v)| {
                if n.is_empty() || n.contains('=') {
                    return Err(Error::invalid(format!(
                        "environment variable name '{n}' is empty or holds '='"
                    )));
                }
                c_string(&format!("{n}={v}"), "an environment entry")
            })
            .collect::<Result<_>>()?;
        let argv_ptrs: Vec<*const c_char> = argv.iter().map(|s| s.as_ptr()).collect();
        let env_ptrs: Vec<*const c_char> = env.iter().map(|s| s.as_ptr()).collect();
        let working_dir = c
            .working_dir
            .as_deref()
            .map(|p| path_c_string(p, "the working directory"))
            .transpose()?;
        let log_dir = c
            .log_dir
            .as_deref()
            .map(|p| path_c_string(p, "the log directory"))
            .transpose()?;
        let mut desc: sys::gf_command_desc = unsafe { std::mem::zeroed() };
        unsafe { sys::gf_command_desc_init(&mut desc, size_of::<sys::gf_command_desc>() as u32) };
        desc.argv = ptr_or_null(&argv_ptrs);
        desc.argc = count(argv_ptrs.len(), "command arguments")?;
        desc.env = ptr_or_null(&env_ptrs);
        desc.env_count = count(env_ptrs.len(), "environment entries")?;
        desc.working_dir = working_dir.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        desc.timeout_s = c.timeout.map_or(0.0, |t| t.as_secs_f64());
        desc.log_dir = log_dir.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        // The CStrings' heap buffers do not move when the vectors holding them do.
        strings.extend(argv);
        strings.extend(env);
        strings.extend(working_dir);
        strings.extend(log_dir);
        Ok(CCommand {
            _strings: strings,
            _argv: argv_ptrs,
            _env: env_ptrs,
            desc,
        })
    }
}

//! Graph documents (gf_graph_serialize / gf_graph_deserialize): a graph whose bodies are
//! kernel names or commands written to bytes and read back, in another process or language.
//! Tasks with closure bodies cannot be written (the error names the first one).
//! A graph read back is reached by index (`task_at`, `data_at`) and carries its metadata.
//!
//! ```
//! use gpuflow::{DocumentFormat, Graph};
//! let mut graph = Graph::new()?;
//! graph.host_buffer("x", &[1.0f64, 2.0])?;
//! graph.set_metadata("workflow", "demo")?;
//! let json = graph.to_document(DocumentFormat::Json)?;
//! assert_eq!(json[0], b'{');
//! let back = Graph::from_document(&json, DocumentFormat::Auto, false)?;
//! assert_eq!(back.task_count()?, 0);
//! assert_eq!(back.data_count()?, 1);
//! assert_eq!(back.metadata()?, vec![("workflow".to_string(), "demo".to_string())]);
//! assert!(Graph::from_document(b"not a graph", DocumentFormat::Auto, false).is_err());
//! # Ok::<(), gpuflow::Error>(())
//! ```
use crate::error::{c_string, check, Error, Result};
use crate::graph::{Data, Graph, Task};
use crate::pool::take_bytes;
use crate::service::copy_str;
use gpuflow_sys as sys;
use std::os::raw::c_void;
use std::ptr;

/// A document's encoding (gf_graph_format).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DocumentFormat {
    /// Reading only: JSON when the text starts with '{', else binary.
    Auto,
    /// FlatBuffers, file identifier "GFLW".
    Binary,
    /// The same schema as JSON text.
    Json,
}

impl DocumentFormat {
    fn raw(self) -> sys::gf_graph_format {
        match self {
            DocumentFormat::Auto => sys::GF_GRAPH_FORMAT_AUTO,
            DocumentFormat::Binary => sys::GF_GRAPH_FORMAT_BINARY,
            DocumentFormat::Json => sys::GF_GRAPH_FORMAT_JSON,
        }
    }
}

impl Graph {
    /// Writes the graph as a self-contained document (not frozen by it). `Auto` is refused:
    /// a writer must choose.
    pub fn to_document(&self, format: DocumentFormat) -> Result<Vec<u8>> {
        if format == DocumentFormat::Auto {
            return Err(Error::invalid(
                "to_document needs DocumentFormat::Binary or ::Json, not Auto",
            ));
        }
        let mut out = sys::gf_bytes {
            data: ptr::null_mut(),
            size: 0,
        };
        // SAFETY: &self: no other call uses the graph meanwhile; out is freed by take_bytes.
        check(unsafe { sys::gf_graph_serialize(&mut out, self.raw(), format.raw()) })?;
        Ok(take_bytes(out))
    }

    /// Reads a graph from a document (untrusted input is fine: the library verifies it and
    /// says what is wrong and where). `mutable`: leave it open for additions, the graph-wide
    /// checks then happen at submit; else it is checked now and frozen, ready to submit.
    pub fn from_document(bytes: &[u8], format: DocumentFormat, mutable: bool) -> Result<Graph> {
        // The cast is for bindgen versions that type the enum constant otherwise.
        #[allow(clippy::unnecessary_cast)]
        let flags = if mutable {
            sys::GF_DESERIALIZE_MUTABLE as u32
        } else {
            0
        };
        let mut raw = ptr::null_mut();
        // SAFETY: bytes is readable for its length during the call and not retained.
        check(unsafe {
            sys::gf_graph_deserialize(
                &mut raw,
                bytes.as_ptr() as *const c_void,
                bytes.len() as u64,
                format.raw(),
                flags,
            )
        })?;
        Ok(Graph::from_raw(raw))
    }

    /// Reads a document and checks it whole (cycles, dangling inputs) without keeping it.
    pub fn validate_document(bytes: &[u8], format: DocumentFormat) -> Result<()> {
        Graph::from_document(bytes, format, false).map(drop)
    }
}

impl Graph {
    /// Sets (or replaces) a metadata entry, kept and written with the graph ("workflow",
    /// "snakemake rule"); keys are non-empty.
    pub fn set_metadata(&mut self, key: &str, value: &str) -> Result<()> {
        let key = c_string(key, "the metadata key")?;
        let value = c_string(value, "the metadata value")?;
        check(unsafe { sys::gf_graph_set_metadata(self.raw(), key.as_ptr(), value.as_ptr()) })
    }

    /// Every metadata entry, in the order keys were first set.
    pub fn metadata(&self) -> Result<Vec<(String, String)>> {
        let mut n = 0;
        check(unsafe { sys::gf_graph_metadata_count(&mut n, self.raw()) })?;
        (0..n)
            .map(|i| {
                let (mut k, mut v) = (ptr::null(), ptr::null());
                check(unsafe { sys::gf_graph_metadata_get(&mut k, &mut v, self.raw(), i) })?;
                // SAFETY: owned by the graph, valid until it changes; copied at once.
                let text = |p| unsafe { copy_str(p) }.unwrap_or_default();
                Ok((text(k), text(v)))
            })
            .collect()
    }

    /// The task at `index` in the order tasks were added (a document's order).
    pub fn task_at(&self, index: u64) -> Result<Task> {
        let mut t = sys::gf_task { id: 0 };
        check(unsafe { sys::gf_graph_task_at(&mut t, self.raw(), index) })?;
        Ok(Task(t.id))
    }

    pub fn data_count(&self) -> Result<u64> {
        let mut n = 0;
        check(unsafe { sys::gf_graph_data_count(&mut n, self.raw()) })?;
        Ok(n)
    }

    /// The data object at `index` in the order they were added, e.g. to fetch a kept result of
    /// a graph read from a document.
    pub fn data_at(&self, index: u64) -> Result<Data> {
        let mut d = sys::gf_data { id: 0 };
        check(unsafe { sys::gf_graph_data_at(&mut d, self.raw(), index) })?;
        Ok(Data(d.id))
    }
}

//! Graphs: buffers, host inputs and tasks with closure bodies, named kernels or commands.
use crate::body::{
    cpu_trampoline, destroy_bodies, gpu_trampoline, Bodies, BodyFn, Element, TaskContext,
};
use crate::command::{CCommand, Command};
use crate::completion::{on_complete, Completion, SubmitOptions, Where};
use crate::error::{c_string, check, Error, Result};
use crate::pool::{ptr_or_null, Pool};
use crate::run::Run;
use gpuflow_sys as sys;
use std::collections::HashMap;
use std::ffi::CString;
use std::mem::size_of;
use std::os::raw::c_void;
use std::ptr;

/// A data object of one graph (gf_data).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Data(pub(crate) u64);

impl Data {
    pub(crate) fn raw(self) -> sys::gf_data {
        sys::gf_data { id: self.0 }
    }
}

/// A task of one graph (gf_task).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Task(pub(crate) u64);

impl Task {
    pub(crate) fn raw(self) -> sys::gf_task {
        sys::gf_task { id: self.0 }
    }
}

/// A graph under construction, then submitted any number of times (the first submit freezes
/// it). `Send` but not `Sync`: gpuflow.h makes every gf_graph_* call externally synchronized,
/// and `&mut self` on the builders enforces it. Dropping it after submitting is fine: runs keep
/// what they need.
pub struct Graph {
    raw: *mut sys::gf_graph,
    buffer_sizes: HashMap<u64, u64>,
}

// SAFETY: a graph may be used from any thread, one at a time (externally synchronized).
unsafe impl Send for Graph {}

impl Graph {
    pub fn new() -> Result<Graph> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::gf_graph_create(&mut raw) })?;
        Ok(Graph {
            raw,
            buffer_sizes: HashMap::new(),
        })
    }

    /// Takes ownership of a graph the library made (a document read back).
    pub(crate) fn from_raw(raw: *mut sys::gf_graph) -> Graph {
        Graph {
            raw,
            buffer_sizes: HashMap::new(),
        }
    }

    pub(crate) fn raw(&self) -> *mut sys::gf_graph {
        self.raw
    }

    /// A buffer of `size` bytes (0: the producing body sets it) that one task will produce.
    /// `keep`: keep it after its last consumer, for `Run::fetch`.
    pub fn buffer(&mut self, name: &str, size: u64, keep: bool) -> Result<Data> {
        let name = c_string(name, "the buffer name")?;
        let mut d: sys::gf_buffer_desc = unsafe { std::mem::zeroed() };
        unsafe { sys::gf_buffer_desc_init(&mut d, size_of::<sys::gf_buffer_desc>() as u32) };
        d.name = name.as_ptr();
        d.size = size;
        // The cast is for bindgen versions that type the macro otherwise.
        #[allow(clippy::unnecessary_cast)]
        let keep_flag = sys::GF_DATA_KEEP as u32;
        d.flags = if keep { keep_flag } else { 0 };
        let mut out = sys::gf_data { id: 0 };
        check(unsafe { sys::gf_graph_add_buffer(&mut out, self.raw, &d) })?;
        self.buffer_sizes.insert(out.id, size);
        Ok(Data(out.id))
    }

    /// A buffer of `len` numbers of type T.
    pub fn buffer_of<T: Element>(&mut self, name: &str, len: usize, keep: bool) -> Result<Data> {
        self.buffer(name, (len * size_of::<T>()) as u64, keep)
    }

    /// A graph input: the numbers in `values`, copied now.
    pub fn host_buffer<T: Element>(&mut self, name: &str, values: &[T]) -> Result<Data> {
        let name = c_string(name, "the buffer name")?;
        let bytes = std::mem::size_of_val(values) as u64;
        let mut out = sys::gf_data { id: 0 };
        check(unsafe {
            sys::gf_graph_add_host_buffer(
                &mut out,
                self.raw,
                name.as_ptr(),
                values.as_ptr() as *const c_void,
                bytes,
                0,
            )
        })?;
        self.buffer_sizes.insert(out.id, bytes);
        Ok(Data(out.id))
    }

    /// Starts a task; `add` adds it.
    pub fn task(&mut self, name: &str) -> TaskBuilder<'_> {
        TaskBuilder {
            graph: self,
            name: name.to_string(),
            cpu: None,
            gpu: None,
            kernel: None,
            command: None,
            cost_key: None,
            resources: Vec::new(),
            priority: 0,
            retries: 0,
            inputs: Vec::new(),
            outputs: Vec::new(),
            after: Vec::new(),
        }
    }

    /// Adds an ordering edge: `task` runs after `before`.
    pub fn add_dependency(&mut self, task: Task, before: Task) -> Result<()> {
        check(unsafe { sys::gf_graph_add_dependency(self.raw, task.raw(), before.raw()) })
    }

    pub fn task_count(&self) -> Result<u64> {
        let mut n = 0;
        check(unsafe { sys::gf_graph_task_count(&mut n, self.raw) })?;
        Ok(n)
    }

    /// Validates the graph against `pool` and starts running it.
    pub fn submit(&self, pool: &Pool) -> Result<Run> {
        self.submit_with(pool, SubmitOptions::new())
    }

    /// `submit` with options: where it runs, a completion callback.
    pub fn submit_with(&self, pool: &Pool, options: SubmitOptions) -> Result<Run> {
        let completion = Completion::new(options.on_complete);
        let mut o: sys::gf_submit_options = unsafe { std::mem::zeroed() };
        unsafe { sys::gf_submit_options_init(&mut o, size_of::<sys::gf_submit_options>() as u32) };
        o.where_ = options.where_.unwrap_or(Where::Anywhere).to_raw();
        o.on_complete = Some(on_complete);
        o.user_data = Completion::into_user_data(completion.clone());
        let mut raw = ptr::null_mut();
        let status = unsafe { sys::gf_graph_submit(&mut raw, pool.raw(), self.raw, &o) };
        if status != sys::GF_OK {
            // SAFETY: nothing was submitted, so the library never calls back with user_data.
            unsafe { Completion::reclaim(o.user_data) };
        }
        check(status)?;
        Ok(Run::from_raw(raw, completion))
    }

    /// Checks the graph against `pool` as `submit` does (and freezes it), running nothing.
    pub fn check(&self, pool: &Pool) -> Result<()> {
        check(unsafe { sys::gf_graph_check(self.raw, pool.raw()) })
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        unsafe { sys::gf_graph_destroy(self.raw) }
    }
}

/// A task being described: bodies (closures for CPU and/or GPU workers, or a named kernel),
/// resources, priority, retries, inputs, outputs and ordering.
pub struct TaskBuilder<'g> {
    graph: &'g mut Graph,
    name: String,
    cpu: Option<Box<BodyFn>>,
    gpu: Option<Box<BodyFn>>,
    kernel: Option<String>,
    command: Option<Command>,
    cost_key: Option<String>,
    resources: Vec<(String, f64)>,
    priority: i32,
    retries: u32,
    inputs: Vec<Data>,
    outputs: Vec<Data>,
    after: Vec<Task>,
}

impl<'g> TaskBuilder<'g> {
    /// The body on CPU workers. It may run on any worker thread, several runs at once.
    pub fn cpu<F>(mut self, body: F) -> Self
    where
        F: Fn(&mut TaskContext<'_>) -> std::result::Result<(), String> + Send + Sync + 'static,
    {
        self.cpu = Some(Box::new(body));
        self
    }

    /// The body on GPU workers (device memory; on emulated devices, host memory).
    pub fn gpu<F>(mut self, body: F) -> Self
    where
        F: Fn(&mut TaskContext<'_>) -> std::result::Result<(), String> + Send + Sync + 'static,
    {
        self.gpu = Some(Box::new(body));
        self
    }

    /// A named kernel instead of closures, resolved against the pool at submit.
    pub fn kernel(mut self, name: &str) -> Self {
        self.kernel = Some(name.to_string());
        self
    }

    /// An external command instead of closures or a kernel (`Command`).
    pub fn command(mut self, command: Command) -> Self {
        self.command = Some(command);
        self
    }

    pub fn cost_key(mut self, key: &str) -> Self {
        self.cost_key = Some(key.to_string());
        self
    }

    /// Requests `amount` of `resource` ("GPU", "gpu_memory", "cpu" or a label).
    pub fn resource(mut self, resource: &str, amount: f64) -> Self {
        self.resources.push((resource.to_string(), amount));
        self
    }

    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    pub fn input(mut self, data: Data) -> Self {
        self.inputs.push(data);
        self
    }

    pub fn output(mut self, data: Data) -> Self {
        self.outputs.push(data);
        self
    }

    pub fn after(mut self, task: Task) -> Self {
        self.after.push(task);
        self
    }

    /// Adds the task; on error nothing is added.
    pub fn add(self) -> Result<Task> {
        fn opt(s: &Option<String>, what: &str) -> Result<Option<CString>> {
            s.as_deref().map(|s| c_string(s, what)).transpose()
        }
        fn len(n: usize) -> Result<u32> {
            u32::try_from(n).map_err(|_| Error::invalid("too many references"))
        }
        let name = c_string(&self.name, "the task name")?;
        let kernel = opt(&self.kernel, "the kernel name")?;
        let cost_key = opt(&self.cost_key, "the cost key")?;
        let names = self
            .resources
            .iter()
            .map(|(n, _)| c_string(n, "a resource name"))
            .collect::<Result<Vec<_>>>()?;
        let resources: Vec<sys::gf_resource> = names
            .iter()
            .zip(&self.resources)
            .map(|(n, (_, a))| sys::gf_resource {
                name: n.as_ptr(),
                amount: *a,
            })
            .collect();
        let inputs: Vec<sys::gf_data> = self.inputs.iter().map(|d| d.raw()).collect();
        let outputs: Vec<sys::gf_data> = self.outputs.iter().map(|d| d.raw()).collect();
        let after: Vec<sys::gf_task> = self.after.iter().map(|t| t.raw()).collect();

        let mut d: sys::gf_task_desc = unsafe { std::mem::zeroed() };
        unsafe { sys::gf_task_desc_init(&mut d, size_of::<sys::gf_task_desc>() as u32) };
        d.name = if self.name.is_empty() {
            ptr::null()
        } else {
            name.as_ptr()
        };
        d.kernel = kernel.as_ref().map_or(ptr::null(), |k| k.as_ptr());
        let command = self.command.as_ref().map(CCommand::new).transpose()?;
        d.command = command.as_ref().map_or(ptr::null(), |c| &c.desc);
        d.cost_key = cost_key.as_ref().map_or(ptr::null(), |k| k.as_ptr());
        d.resources = ptr_or_null(&resources);
        d.resource_count = len(resources.len())?;
        d.priority = self.priority;
        d.retries = self.retries;
        d.inputs = ptr_or_null(&inputs);
        d.input_count = len(inputs.len())?;
        d.outputs = ptr_or_null(&outputs);
        d.output_count = len(outputs.len())?;
        d.after = ptr_or_null(&after);
        d.after_count = len(after.len())?;

        let has_bodies = self.cpu.is_some() || self.gpu.is_some();
        let mut bodies: *mut Bodies = ptr::null_mut();
        if has_bodies {
            d.cpu_fn = self.cpu.as_ref().map(|_| cpu_trampoline as _);
            d.gpu_fn = self.gpu.as_ref().map(|_| gpu_trampoline as _);
            let sizes = self
                .outputs
                .iter()
                .map(|o| self.graph.buffer_sizes.get(&o.0).copied().unwrap_or(0))
                .collect();
            bodies = Box::into_raw(Box::new(Bodies {
                cpu: self.cpu,
                gpu: self.gpu,
                output_sizes: Some(sizes),
            }));
            d.user_data = bodies as *mut c_void;
            d.user_data_destroy = Some(destroy_bodies);
        }
        let mut out = sys::gf_task { id: 0 };
        let status = unsafe { sys::gf_graph_add_task(&mut out, self.graph.raw, &d) };
        if status != sys::GF_OK && !bodies.is_null() {
            // On failure user_data stays ours.
            destroy_bodies(bodies as *mut c_void);
        }
        check(status)?;
        Ok(Task(out.id))
    }
}

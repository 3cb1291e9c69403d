//! seed — the workload of Dask's GPU blog post, in Rust, as examples/seed_array.cpp does it in C++:
//!
//!     x = da.random.RandomState().normal(10, 1, size=(N, N), chunks=(C, C))
//!     (x + 1)[::2, ::2].sum().compute()
//!
//! One task per (C, C) chunk draws its C*C normals (a splitmix64 stream per chunk, Box-Muller),
//! adds 1, keeps every other row and column (global indices) and sums them; the partial sums are
//! added pairwise, level by level, down to one. Chunk and sum tasks have a CPU body and, when the
//! pool's devices are emulated (host memory), the same body for GPU workers, so they spread over
//! every worker. Checks the sum against 11 * ceil(N/2)^2 within 6 standard deviations and exits
//! non-zero otherwise. Usage: seed [N [C]] (default 2000 250).
use gpuflow::{Data, Graph, Pool, TaskContext};
use std::sync::Arc;

const MEAN: f64 = 10.0;
const ADD: f64 = 1.0;

struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in (0, 1].
    fn uniform(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
    /// Two standard normals (Box-Muller).
    fn normals(&mut self) -> (f64, f64) {
        let r = (-2.0 * self.uniform().ln()).sqrt();
        let t = 2.0 * std::f64::consts::PI * self.uniform();
        (r * t.cos(), r * t.sin())
    }
}

/// Chunk (bi, bj): rows r0..r1, columns c0..c1 of the N x N array.
fn chunk_sum(seed: u64, rows: (usize, usize), cols: (usize, usize)) -> f64 {
    let mut rng = SplitMix(seed);
    let width = cols.1 - cols.0;
    let mut row = vec![0.0f64; width + 1];
    let mut sum = 0.0;
    for r in rows.0..rows.1 {
        let mut c = 0;
        while c < width {
            let (a, b) = rng.normals();
            row[c] = MEAN + a;
            row[c + 1] = MEAN + b;
            c += 2;
        }
        if r % 2 != 0 {
            continue;
        }
        for (k, x) in row[..width].iter().enumerate() {
            if (cols.0 + k) % 2 == 0 {
                sum += x + ADD;
            }
        }
    }
    sum
}

fn body<F>(f: F) -> impl Fn(&mut TaskContext<'_>) -> Result<(), String> + Send + Sync + Clone
where
    F: Fn(&mut TaskContext<'_>) -> Result<f64, gpuflow::Error> + Send + Sync + 'static,
{
    let f = Arc::new(f);
    move |ctx: &mut TaskContext<'_>| {
        let value = f(ctx).map_err(|e| e.to_string())?;
        ctx.output_as::<f64>(0).map_err(|e| e.to_string())?[0] = value;
        Ok(())
    }
}

fn main() -> Result<(), gpuflow::Error> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("N and C are numbers"))
        .collect();
    let n = *args.first().unwrap_or(&2000);
    let c = *args.get(1).unwrap_or(&250);
    assert!(n > 0 && c > 0, "N and C must be positive");
    let pool = Pool::with_defaults()?;
    let workers = pool.worker_count()?;
    let emulated = (0..workers).all(|w| {
        pool.worker_info(w)
            .map(|i| !i.gpu || i.emulated)
            .unwrap_or(false)
    });

    let mut graph = Graph::new()?;
    let blocks = (n + c - 1) / c;
    let mut level: Vec<Data> = Vec::new();
    for bi in 0..blocks {
        for bj in 0..blocks {
            let rows = (bi * c, ((bi + 1) * c).min(n));
            let cols = (bj * c, ((bj + 1) * c).min(n));
            let seed = (bi * blocks + bj) as u64;
            let out = graph.buffer_of::<f64>(&format!("chunk-{bi}-{bj}"), 1, false)?;
            let f = body(move |_| Ok(chunk_sum(seed, rows, cols)));
            let mut task = graph
                .task(&format!("chunk-{bi}-{bj}"))
                .output(out)
                .cpu(f.clone());
            if emulated {
                task = task.gpu(f);
            }
            task.add()?;
            level.push(out);
        }
    }
    let mut depth = 0;
    while level.len() > 1 {
        depth += 1;
        let mut next = Vec::new();
        for (k, pair) in level.chunks(2).enumerate() {
            if pair.len() == 1 {
                next.push(pair[0]);
                continue;
            }
            let out = graph.buffer_of::<f64>(&format!("sum-{depth}-{k}"), 1, false)?;
            let f = body(|ctx| Ok(ctx.input_as::<f64>(0)?[0] + ctx.input_as::<f64>(1)?[0]));
            let mut task = graph
                .task(&format!("sum-{depth}-{k}"))
                .input(pair[0])
                .input(pair[1])
                .output(out)
                .cpu(f.clone());
            if emulated {
                task = task.gpu(f);
            }
            task.add()?;
            next.push(out);
        }
        level = next;
    }
    let run = graph.submit(&pool)?;
    run.wait()?;
    let sum = run.fetch_as::<f64>(level[0])?[0];
    let m = ((n + 1) / 2) as f64;
    let expected = (MEAN + ADD) * m * m;
    let tolerance = 6.0 * m + 1e-12 * expected;
    let stats = run.stats()?;
    println!("N {n}  C {c}  tasks {}  workers {workers}", stats.tasks);
    println!("sum       {sum:.6}\nexpected  {expected:.1}  (11 * {m:.0}^2)");
    if (sum - expected).abs() > tolerance {
        eprintln!("seed: the sum is off by more than 6 sigma ({tolerance:.3})");
        std::process::exit(1);
    }
    println!("seed: OK");
    Ok(())
}

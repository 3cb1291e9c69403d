//! hello — the smallest gpuflow program in Rust: one task writes 10 + 1 into an 8-byte buffer,
//! the caller fetches and prints it (Dask's `client.submit(lambda: 10 + 1).result()`).
//! Exits non-zero if anything fails or the value is wrong.
use gpuflow::{Graph, Pool};

fn main() -> Result<(), gpuflow::Error> {
    let pool = Pool::with_defaults()?; // every core, plus emulated devices without a GPU
    let mut graph = Graph::new()?;
    let result = graph.buffer_of::<i64>("result", 1, true)?;
    graph
        .task("ten_plus_one")
        .output(result)
        .cpu(|ctx| {
            ctx.output_as::<i64>(0).map_err(|e| e.to_string())?[0] = 10 + 1;
            Ok(())
        })
        .add()?;
    let run = graph.submit(&pool)?;
    run.wait()?;
    let value = run.fetch_as::<i64>(result)?[0];
    println!("10 + 1 = {value}");
    if value != 11 {
        std::process::exit(1);
    }
    Ok(())
}

//! `ajs cases FILE…`: case files run in parallel, reported in argument order.
//!
//! Each worker thread has its own single-threaded runtime and takes the next file; the report
//! (one `FAIL` line per failing case, then `N passed, M failed`) is printed per file in the
//! order the files were given, whatever order they finish in. On a terminal, stderr shows a
//! progress bar; otherwise one plain line per file.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use ajs_runner::cli::at_least_one;
use ajs_runner::exit::{write_stdout, Usage, RUN_FAILED, SUCCESS};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use crate::cases::{failure_line, run_file, CaseReport};

/// `cases`'s arguments.
#[derive(Args)]
#[command(
    about = "Run conformance case files",
    long_about = "Runs conformance case files (shared/conformance/README.md), several files at \
once: one line per failing case, in the order of the files and of their cases, then \
`N passed, M failed`. On a terminal, stderr shows a progress bar; otherwise a plain line per \
file. Exit codes: 0 every case passed, 1 a case failed, 2 bad usage."
)]
pub struct CasesArgs {
    /// The case files (JSON arrays of cases).
    #[arg(value_name = "FILE", required = true)]
    files: Vec<String>,
    /// Files run at once (default: the machine's available parallelism; at least 1).
    #[arg(long, value_name = "N", value_parser = at_least_one::<usize>)]
    jobs: Option<usize>,
}

/// What a worker sends back: the file's index and its cases' reports.
type Done = (usize, Vec<CaseReport>);

/// Runs files from `files`, taking the next index from `next`, until none is left.
fn worker(files: &[String], next: &AtomicUsize, tx: &mpsc::Sender<Done>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(file) = files.get(i) else { return };
        let reports = match &rt {
            Ok(rt) => tokio::task::LocalSet::new().block_on(rt, run_file(file)),
            Err(e) => vec![(
                file.clone(),
                Some(format!("cannot start the async runtime: {e}")),
            )],
        };
        if tx.send((i, reports)).is_err() {
            return;
        }
    }
}

/// Where progress goes: a bar on a terminal, plain lines otherwise.
enum Progress {
    Bar(ProgressBar),
    Lines { total: usize },
}

impl Progress {
    fn new(total: usize) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress::Lines { total };
        }
        let bar = ProgressBar::new(total as u64);
        if let Ok(style) =
            ProgressStyle::with_template("{bar:30} {pos}/{len} files {elapsed} {wide_msg}")
        {
            bar.set_style(style);
        }
        Progress::Bar(bar)
    }

    /// A file finished (in any order).
    fn finished(&self, failed_so_far: usize) {
        if let Progress::Bar(bar) = self {
            bar.inc(1);
            bar.set_message(format!("{failed_so_far} failing"));
        }
    }

    /// A file's report was printed (in argument order).
    fn reported(&self, index: usize, file: &str, cases: usize, failing: usize) {
        if let Progress::Lines { total } = self {
            eprintln!(
                "ajs cases: [{}/{total}] {file}: {cases} cases, {failing} failing",
                index + 1
            );
        }
    }

    /// Writes report lines without tearing the bar.
    fn print(&self, text: &str) -> std::io::Result<()> {
        match self {
            Progress::Bar(bar) => bar.suspend(|| write_stdout(text)),
            Progress::Lines { .. } => write_stdout(text),
        }
    }

    fn done(&self) {
        if let Progress::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

/// `ajs cases`.
pub fn cmd_cases(a: &CasesArgs) -> Result<ExitCode, Usage> {
    let files = &a.files;
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let jobs = a.jobs.unwrap_or(cores).clamp(1, files.len().max(1));
    let next = AtomicUsize::new(0);
    let progress = Progress::new(files.len());
    let (mut passed, mut failed) = (0usize, 0usize);
    let mut write_error = None;
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<Done>();
        let handles: Vec<_> = (0..jobs)
            .map(|_| {
                let (tx, next) = (tx.clone(), &next);
                s.spawn(move || worker(files, next, &tx))
            })
            .collect();
        drop(tx);
        let mut waiting: BTreeMap<usize, Vec<CaseReport>> = BTreeMap::new();
        let mut failing_total = 0;
        let mut print_from = 0;
        let mut print = |i: usize, reports: Vec<CaseReport>| {
            let mut text = String::new();
            let mut failing = 0;
            for (name, failure) in &reports {
                match failure {
                    None => passed += 1,
                    Some(why) => {
                        failed += 1;
                        failing += 1;
                        text.push_str(&failure_line(name, why));
                        text.push('\n');
                    }
                }
            }
            if let Err(e) = progress.print(&text) {
                write_error.get_or_insert(e);
            }
            progress.reported(i, &files[i], reports.len(), failing);
        };
        for (i, reports) in rx {
            failing_total += reports.iter().filter(|(_, f)| f.is_some()).count();
            progress.finished(failing_total);
            waiting.insert(i, reports);
            while let Some(reports) = waiting.remove(&print_from) {
                print(print_from, reports);
                print_from += 1;
            }
        }
        // a worker that panicked never sent its file: that file fails, the rest still prints
        let crashed = handles.into_iter().any(|h| h.join().is_err());
        for (i, file) in files.iter().enumerate().skip(print_from) {
            let reports = waiting.remove(&i).unwrap_or_else(|| {
                let why = if crashed {
                    "runner: the worker running this file panicked"
                } else {
                    "runner: the file was not run"
                };
                vec![(file.clone(), Some(why.to_string()))]
            });
            print(i, reports);
        }
    });
    progress.done();
    if let Err(e) = progress.print(&format!("{passed} passed, {failed} failed\n")) {
        write_error.get_or_insert(e);
    }
    if let Some(e) = write_error {
        eprintln!("ajs cases: cannot write the report: {e}");
        return Ok(ExitCode::from(RUN_FAILED));
    }
    Ok(ExitCode::from(if failed == 0 {
        SUCCESS
    } else {
        RUN_FAILED
    }))
}

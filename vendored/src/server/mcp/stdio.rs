//! `tollgate mcp`: the MCP server on stdin and stdout, for a client that
//! starts the server itself (a desktop assistant, an IDE, an agent
//! framework's local tool).
//!
//! One JSON-RPC message per line each way; stdout carries nothing else
//! (logs go to stderr). Messages are answered as they finish, not in
//! order: a `wait_for_approval` that waits a minute does not hold up a
//! `ping` behind it. At the end of stdin the calls under way finish
//! (a wait at most its timeout), their answers are written, and the
//! process ends; on SIGTERM or ctrl-c the waits end at once with the
//! request as it stands.

use std::io::{BufRead, Write};
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::jsonrpc::{self, INVALID_REQUEST, Parsed, RpcError};
use super::protocol::{self, Context};
use crate::server::http::state::AppState;
use crate::service::{Caller, Scope};

/// `tollgate mcp`: serve stdin and stdout as `caller`, a requester (see
/// `cli/mcp.rs`), for `agent`'s gate requests, until stdin ends.
///
/// stdin and stdout are read and written by a thread each, with std's
/// blocking I/O: the runtime's tokio is built without its `io-std`
/// feature, and one reader and one writer need nothing more.
pub(crate) async fn run(agent: crate::AgentRun, caller: Caller) -> std::io::Result<()> {
    let state = crate::server::standalone_state(agent, stop_on_signal());
    let limit = crate::server::DEFAULT_MAX_BODY_BYTES;
    let (lines, incoming) = mpsc::channel::<Line>(16);
    std::thread::spawn(move || {
        let mut input = std::io::stdin().lock();
        loop {
            let line = read_line(&mut input, limit).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot read stdin: stopping");
                Line::End
            });
            let end = line == Line::End;
            if lines.blocking_send(line).is_err() || end {
                break;
            }
        }
    });
    let (answers, mut outgoing) = mpsc::unbounded_channel::<String>();
    let writer = std::thread::spawn(move || {
        let mut output = std::io::stdout().lock();
        while let Some(answer) = outgoing.blocking_recv() {
            writeln!(output, "{answer}")?;
            output.flush()?;
        }
        Ok::<(), std::io::Error>(())
    });
    serve(state, caller, Scope::Requester, incoming, answers, limit).await;
    writer
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the stdout writer panicked")))
}

/// Answer the lines of `incoming` on `answers` until the input ends or
/// the state's shutdown, as `caller` with `scope`. The calls under way
/// then finish (a shutdown ends their waits) before this returns.
pub(crate) async fn serve(
    state: AppState,
    caller: Caller,
    scope: Scope,
    mut incoming: mpsc::Receiver<Line>,
    answers: mpsc::UnboundedSender<String>,
    limit: usize,
) {
    let mut shutdown = state.shutdown.clone();
    let shared = Arc::new((state, caller));
    let mut calls = JoinSet::new();
    loop {
        let line = tokio::select! {
            line = incoming.recv() => line.unwrap_or(Line::End),
            _ = shutdown.wait_for(|stopping| *stopping) => Line::End,
        };
        let text = match line {
            Line::End => break,
            Line::TooLong => {
                let error = RpcError::new(
                    INVALID_REQUEST,
                    format!("a message longer than {limit} bytes was skipped"),
                );
                let _ = answers.send(jsonrpc::failure(serde_json::Value::Null, error).to_string());
                continue;
            }
            Line::Message(text) => text,
        };
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let parsed = jsonrpc::parse(&text);
        let shared = Arc::clone(&shared);
        let answers = answers.clone();
        calls.spawn(async move {
            let (state, caller) = &*shared;
            let context = Context {
                state,
                caller,
                scope,
            };
            let answer = match parsed {
                Err(error) => Some(error),
                Ok(Parsed::Single(message)) => protocol::handle(&context, message).await,
                Ok(Parsed::Batch(messages)) => super::batch::handle(&context, messages).await,
            };
            if let Some(answer) = answer {
                let _ = answers.send(answer.to_string());
            }
        });
        // Finished calls are collected as we go, so the set stays small.
        while calls.try_join_next().is_some() {}
    }
    while calls.join_next().await.is_some() {}
}

/// One line of input.
#[derive(Debug, PartialEq)]
pub(crate) enum Line {
    /// A line, without its newline.
    Message(Vec<u8>),
    /// A line longer than the limit went by (and was not kept).
    TooLong,
    /// The input ended.
    End,
}

/// The next line of `input`, holding at most `limit` bytes of it.
fn read_line<R: BufRead>(input: &mut R, limit: usize) -> std::io::Result<Line> {
    let mut line = Vec::new();
    let mut too_long = false;
    let mut read_any = false;
    loop {
        let buffer = match input.fill_buf() {
            Ok(buffer) => buffer,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buffer.is_empty() {
            return Ok(match (read_any, too_long) {
                (false, _) => Line::End,
                (true, true) => Line::TooLong,
                (true, false) => Line::Message(line),
            });
        }
        read_any = true;
        let (chunk, ends_line) = match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => (&buffer[..at], Some(at + 1)),
            None => (buffer, None),
        };
        if !too_long && line.len() + chunk.len() <= limit {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line = Vec::new();
        }
        let used = ends_line.unwrap_or(buffer.len());
        input.consume(used);
        if ends_line.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Message(line)
            });
        }
    }
}

/// The shutdown a stdio server's waits listen to: set by SIGTERM or
/// ctrl-c.
pub(crate) fn stop_on_signal() -> watch::Receiver<bool> {
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            let Ok(mut terminate) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            else {
                return;
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("stopping: waits under way answer with the request as it stands");
        let _ = stop.send(true);
        // Held until the process ends, so the receivers never see it close.
        std::future::pending::<()>().await;
    });
    stopped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_whole_and_long_ones_skipped() {
        let text = b"{\"a\":1}\r\n0123456789abcdef\n\nlast".to_vec();
        let mut input = std::io::BufReader::with_capacity(4, &text[..]);
        let mut next = || read_line(&mut input, 10).unwrap();
        assert_eq!(next(), Line::Message(b"{\"a\":1}\r".to_vec()));
        assert_eq!(next(), Line::TooLong);
        assert_eq!(next(), Line::Message(Vec::new()));
        assert_eq!(next(), Line::Message(b"last".to_vec()));
        assert_eq!(next(), Line::End);
    }
}

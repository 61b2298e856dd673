//! Transactions whose `BEGIN` shares a round trip with their first
//! statements.
//!
//! tokio-postgres sends a request when its future is first polled (for a
//! prepared statement; an unprepared one is parsed first) and answers the
//! requests of one connection in the order they were sent. [`sent`] polls
//! a request once, so it is on the wire in program order, and hands back
//! the future of its answer: requests sent one after the other that way
//! travel together, and the server runs them in that order.
//!
//! [`Transaction::begin`] sends `BEGIN` that way, without waiting for its
//! answer: whatever the body sends next follows it on the same connection,
//! inside the transaction. [`Transaction::finish`] then reads `BEGIN`'s
//! answer and commits only when both it and the body succeeded; otherwise
//! it rolls back. `BEGIN` on an idle connection fails only when the
//! connection does, and then nothing sent after it ran either.
//!
//! The guarantees of tokio-postgres's own `Transaction` hold: a body's
//! error rolls the transaction back, and a transaction dropped unfinished
//! (its future cancelled) has `ROLLBACK` sent before the connection goes
//! back to the pool, ahead of anything its next user sends.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::store::StoreResult;

/// The answer to a request already sent (see [`sent`]).
pub(crate) type Sent<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Poll `request` once, so a tokio-postgres request of a prepared
/// statement is sent now, before any request made after this call; await
/// the result for its answer.
pub(crate) fn sent<'a, T: Send + 'a>(request: impl Future<Output = T> + Send + 'a) -> Sent<'a, T> {
    let mut request = Box::pin(request);
    match request
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(answer) => Box::pin(std::future::ready(answer)),
        Poll::Pending => request,
    }
}

/// An open transaction on a pooled connection; see the module's comment.
pub(crate) struct Transaction<'c> {
    client: &'c deadpool_postgres::Client,
    begun: Option<Sent<'c, Result<(), tokio_postgres::Error>>>,
}

impl<'c> Transaction<'c> {
    /// Send `BEGIN` (READ COMMITTED, the default) without waiting for it.
    pub(crate) fn begin(client: &'c deadpool_postgres::Client) -> Transaction<'c> {
        Transaction {
            client,
            begun: Some(sent(client.batch_execute("BEGIN"))),
        }
    }

    /// Commit when `BEGIN` and the body (`out`) both succeeded, else roll
    /// back and return the error (`BEGIN`'s first: without it the body did
    /// not run in a transaction).
    pub(crate) async fn finish<T>(mut self, out: StoreResult<T>) -> StoreResult<T> {
        let Some(begun) = self.begun.take() else {
            unreachable!("a transaction finishes once")
        };
        match (begun.await, out) {
            (Ok(()), Ok(value)) => {
                self.client.batch_execute("COMMIT").await?;
                Ok(value)
            }
            (begun, out) => {
                // Best effort, as tokio-postgres's own rollback on drop: a
                // connection that cannot roll back is broken, and the pool
                // does not hand out a closed connection.
                let _ = self.client.batch_execute("ROLLBACK").await;
                begun?;
                out
            }
        }
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.begun.is_some() {
            // Dropped unfinished (cancelled): roll back before the
            // connection serves anyone else; nobody waits for the answer.
            drop(sent(self.client.batch_execute("ROLLBACK")));
        }
    }
}

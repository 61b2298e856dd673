//! The PostgreSQL store: what the store is and whether it can be written now.

use super::*;

#[async_trait]
impl Health for PostgresStore {
    fn describe(&self) -> String {
        self.description.clone()
    }

    async fn check_writable(&self) -> StoreResult<()> {
        // Reachable, and a primary that takes writes: nothing is written.
        let client = self.context("checking the store can take writes", self.client().await)?;
        let row = client
            .query_one(
                "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'",
                &[],
            )
            .await;
        let read_only: bool = self
            .context(
                "checking the store can take writes",
                row.map_err(Into::into),
            )?
            .try_get(0)
            .map_err(StoreError::from)?;
        if read_only {
            return Err(StoreError::NotWritable {
                path: self.description.clone(),
                detail: "the server is read-only (a standby, or default_transaction_read_only \
                         is on): point the URL at the primary"
                    .into(),
            });
        }
        Ok(())
    }

    async fn verify_writable(&self) -> StoreResult<()> {
        // Bookkeeping, not a decision: the probe row is deleted in the same
        // transaction, so its time is never read (no clock needed).
        let now = crate::support::time::now();
        let result: StoreResult<()> = async {
            in_transaction!(self, |tx| {
                async {
                    ops::execute(
                    &tx,
                    "INSERT INTO tollgate_claims (key, owner, expires_at) VALUES ($1, 'probe', $2) \
                     ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at",
                    &[&WRITE_PROBE_KEY, &now],
                )
                .await?;
                    ops::execute(
                        &tx,
                        "DELETE FROM tollgate_claims WHERE key = $1",
                        &[&WRITE_PROBE_KEY],
                    )
                    .await?;
                    Ok(())
                }
                .await
            })
        }
        .await;
        self.context("probing the store with a write", result)
    }

    fn change_feed(&self) -> Option<Arc<dyn ChangeFeed>> {
        Some(Arc::new(listen::Listener::new(
            self.config.clone(),
            self.tls.clone(),
        )))
    }

    fn notifications(self: Arc<Self>) -> Option<SharedNotifications> {
        Some(self)
    }
}

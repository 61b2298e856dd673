//! The SQLite store: what the store is and whether it can be written now.

use super::*;

#[async_trait]
impl Health for SqliteStore {
    fn describe(&self) -> String {
        if self.in_memory_db() {
            return MEMORY.into();
        }
        format!("sqlite://{}", self.db.path.display())
    }

    fn one_kernel(&self) -> bool {
        true
    }

    fn writer_stats(&self) -> Option<WriterStats> {
        // A database in memory reads through its writer too: its counts
        // would not be writes.
        (!self.in_memory_db()).then(|| self.db.writer.stats())
    }

    async fn check_writable(&self) -> StoreResult<()> {
        if let Some(detail) = lock(&self.db.corrupt).clone() {
            return Err(StoreError::CorruptFile {
                path: self.db.path.display().to_string(),
                detail,
            });
        }
        if !self.in_memory_db() {
            let path = self.db.path.clone();
            blocking(move || files::check_writable(&path)).await?;
        }
        if self.db.unwritable.load(Ordering::Relaxed) {
            // A write failed (no space, no permission, an I/O error): only a
            // real one tells whether that is over.
            return self.probe_write().await;
        }
        // All well so far: nothing is written (GET never changes state), and
        // nothing waits for another process's write lock.
        Ok(())
    }

    async fn verify_writable(&self) -> StoreResult<()> {
        self.read("checking the file (PRAGMA quick_check)", quick_check)
            .await?;
        self.probe_write().await
    }

    fn notifications(self: Arc<Self>) -> Option<SharedNotifications> {
        Some(self)
    }
}

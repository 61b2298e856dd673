//! The store contract (DESIGN §3-§4), written once and run against every
//! store. A backend provides an async `open` returning a [`TestStore`] and
//! calls [`store_conformance_tests!`] inside its own module:
//!
//! ```ignore
//! mod sqlite {
//!     async fn open() -> TestStore { ... }
//!     store_conformance_tests!(open);
//! }
//! ```
//!
//! Every case drives the store through the `StateStore` trait only, with an
//! explicit clock (every method takes `now`), so the cases are deterministic
//! and never sleep.
//!
//! A module per concept of the store, each case where the concept it mainly
//! tests is: `runs` (the run log a driver writes), `approvals` (claims,
//! expiry, cancels), `queries` (the read model), `keys` (dedupe keys),
//! `specs` (the spec versions runs started under), `votes` (the ledger of
//! votes on gates with rules, and the vote that settles one) and
//! `values` (what every write keeps or refuses). `fixtures` holds the
//! builders they share and `prelude` every import they share.

#![allow(dead_code)]

use std::any::Any;
use std::future::Future;
use std::pin::Pin;

use tollgate_runtime::store::SharedStore;

mod fixtures;
mod prelude;

pub mod approvals;
pub mod keys;
pub mod moves;
pub mod outbox;
pub mod queries;
pub mod runs;
pub mod specs;
pub mod values;
pub mod votes;

// What the store suites and the notification cases build with. The
// PostgreSQL bench includes this module by path and uses only some of them.
#[allow(unused_imports)]
pub use fixtures::{SPEC, TTL, approve, at, paused_run};

/// Opens another handle on the database of a store under test.
type Reopen = Box<dyn Fn() -> Pin<Box<dyn Future<Output = SharedStore> + Send>> + Send + Sync>;

/// A store under test plus whatever must outlive it (a temp dir, a schema).
pub struct TestStore {
    pub store: SharedStore,
    reopen: Option<Reopen>,
    _keep: Option<Box<dyn Any + Send>>,
}

impl TestStore {
    pub fn new(store: SharedStore) -> TestStore {
        TestStore {
            store,
            reopen: None,
            _keep: None,
        }
    }

    pub fn keeping(store: SharedStore, keep: impl Any + Send) -> TestStore {
        TestStore {
            store,
            reopen: None,
            _keep: Some(Box::new(keep)),
        }
    }

    /// A store whose database `reopen` opens again, with connections of
    /// its own, as another process would (a file, a database server).
    pub fn reopening<F>(mut self, reopen: impl Fn() -> F + Send + Sync + 'static) -> TestStore
    where
        F: Future<Output = SharedStore> + Send + 'static,
    {
        self.reopen = Some(Box::new(move || Box::pin(reopen())));
        self
    }

    /// `n` handles on the store's database, the store first, each other
    /// one opened anew; a store that cannot be opened twice (memory: one
    /// private database) gives itself `n` times.
    pub async fn handles(&self, n: usize) -> Vec<SharedStore> {
        let mut handles = vec![self.store.clone()];
        while handles.len() < n {
            handles.push(match &self.reopen {
                Some(reopen) => reopen().await,
                None => self.store.clone(),
            });
        }
        handles
    }
}

/// One `#[tokio::test]` per case, each on a fresh store from `$open`, in a
/// module per concept as the cases are (`memory::approvals::...`), so one
/// concept's cases run alone with a filter. Include this module with
/// `#[macro_use]` to use it.
macro_rules! store_conformance_tests {
    ($open:ident) => {
        store_conformance_tests!(@concept $open; runs:
            create_pause_claim_end_round_trip_keeps_every_field,
            events_come_back_in_seq_order_after_a_seq,
            writes_to_an_unknown_run_are_run_not_found,
            creating_a_run_twice_is_refused,
            a_run_stored_at_its_pause_is_one_atomic_write,
            a_run_stored_at_its_end_is_one_atomic_write,
            a_refused_first_write_stores_nothing,
            a_driver_keeps_its_run_until_its_lease_runs_out_then_loses_every_write,
            runs_without_a_lease_are_orphans_with_one_winner_among_many_claimers,
            a_dead_owners_runs_are_taken_over_before_their_lease_ends_with_one_winner,
            the_journal_keeps_each_steps_start_then_its_output,
            an_operators_change_applies_only_from_the_statuses_it_names_once,
            a_retry_and_a_fail_racing_on_a_stuck_run_have_exactly_one_winner,
        );
        store_conformance_tests!(@concept $open; approvals:
            claim_of_an_unknown_key_is_not_found,
            claim_after_expiry_is_approval_expired,
            second_claim_is_already_resolved_saying_who_what_when,
            approve_under_another_spec_is_spec_changed_and_stays_pending,
            reject_is_allowed_under_another_spec,
            modify_stores_the_new_payload_in_decision_data,
            concurrent_claims_of_one_key_have_exactly_one_winner,
            expiry_sweep_expires_once_and_ends_the_run,
            a_sweep_of_more_than_one_batch_expires_every_overdue_record_oldest_first,
            decisions_racing_a_sweep_of_more_than_one_batch_each_have_one_outcome,
            expired_records_are_neither_listed_nor_claimable,
            a_runs_latest_approval_key_is_found_whatever_its_status,
            a_claim_makes_the_claimer_the_owner_and_a_pause_lets_go,
            a_claim_that_ends_the_run_ends_it_in_the_same_write,
            a_claim_with_a_planned_end_writes_both_or_nothing,
            cancelling_a_waiting_run_cancels_its_approval_in_one_write,
            cancelling_a_running_run_ends_it_cancelled,
            a_final_run_cannot_be_cancelled_and_an_unknown_one_is_not_found,
            a_cancel_racing_claims_has_exactly_one_winner,
        );
        store_conformance_tests!(@concept $open; moves:
            a_move_takes_the_record_and_its_run_to_the_new_version_with_one_event,
            a_move_of_a_record_not_pending_on_its_version_changes_nothing,
            moves_and_decisions_racing_on_one_key_have_exactly_one_first,
        );
        store_conformance_tests!(@concept $open; queries:
            pending_pages_are_newest_first_without_duplicates,
            pending_list_filters_by_agent,
            pending_approvals_are_counted_by_step,
            pending_approvals_are_counted_by_spec_version,
            malformed_cursor_is_rejected,
            stuck_lists_decided_runs_that_never_finished,
            runs_are_counted_by_status,
            runs_are_listed_newest_first_by_page_and_filtered_by_agent_and_status,
            a_malformed_runs_cursor_is_rejected,
            runs_are_searched_by_id_agent_input_trigger_and_their_gates,
            approvals_are_searched_by_agent_input_and_who_started_them,
            approvals_are_listed_newest_first_by_decision_else_creation,
            approval_pages_follow_a_cursor_across_equal_times,
            approvals_filter_by_status_step_and_text_alone_and_combined,
            approvals_filter_by_spec_version_current_stale_and_hash,
            an_overdue_pending_approval_is_listed_as_expired,
            like_metacharacters_in_the_text_are_matched_literally,
            a_text_filter_fills_its_pages_past_rows_only_its_sql_let_through,
            another_agents_approvals_are_not_listed,
            a_malformed_approvals_cursor_is_rejected,
        );
        store_conformance_tests!(@concept $open; keys:
            claim_key_is_exclusive_until_released_or_expired,
            a_run_created_once_claims_its_key_in_the_same_write_or_not_at_all,
        );
        store_conformance_tests!(@concept $open; specs:
            a_version_is_recorded_once_and_read_back_whole,
            a_second_record_of_a_hash_moves_last_seen_only,
            versions_are_listed_with_their_pending_approvals_and_live_runs,
            concurrent_records_of_one_hash_never_fail_or_duplicate,
        );
        store_conformance_tests!(@concept $open; votes:
            a_pause_keeps_its_roster,
            an_approvers_input_is_kept_with_the_decision_and_each_vote,
            a_plain_gates_vote_settles_it_at_once_as_a_claim_would,
            two_of_finance_and_one_of_security_settle_with_the_third_vote_then_refuse,
            ledgers_of_many_gates_are_read_at_once,
            a_requester_a_non_member_and_a_second_vote_are_refused_writing_nothing,
            a_reject_settles_a_gate_with_rules,
            a_vote_on_another_payload_is_payload_changed_and_writes_nothing,
            a_modify_supersedes_the_votes_before_it_and_settles_with_the_edit,
            a_vote_on_an_expired_record_is_approval_expired;
            across 3 handles:
            concurrent_deciding_votes_from_three_handles_settle_once,
            a_vote_racing_a_cancel_has_exactly_one_winner,
        );
        store_conformance_tests!(@concept $open; outbox:
            a_gate_without_routes_writes_no_notice,
            each_change_writes_its_notices_in_its_own_transaction,
            a_refused_change_writes_no_notice,
            votes_expiry_cancels_and_nudges_write_their_notices,
            mail_goes_to_each_decider_mail_can_reach,
            a_leased_notice_has_one_sender_until_its_lease_runs_out,
            failed_notices_come_due_again_and_dead_ones_wait_for_an_operator,
            notices_are_listed_newest_first_by_status_key_and_page,
            a_disabled_endpoint_takes_notices_again_after_a_retry,
            lanes_lease_their_share_and_open_the_retry_window_at_the_first_lease,
            an_approvals_slack_notices_are_leased_one_at_a_time_in_order,
            a_postponed_notice_counts_no_attempt_and_keeps_its_window;
            across 3 handles:
            workers_on_three_handles_lease_each_notice_once,
            workers_on_three_handles_keep_a_lane_to_its_share,
        );
        store_conformance_tests!(@concept $open; values:
            nul_characters_are_kept_in_every_field,
            a_runs_outline_is_the_run_without_its_input,
            a_time_past_the_year_9999_is_refused_before_any_write,
            json_nested_deeper_than_a_store_reads_back_is_refused_before_any_write,
        );
    };
    (@concept $open:ident; $concept:ident: $($case:ident),* $(,)?
        $(; across $n:literal handles: $($across:ident),* $(,)?)?) => {
        mod $concept {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let under_test = super::$open().await;
                    $crate::common::store_cases::$concept::$case(under_test.store.clone()).await;
                }
            )*
            // Cases of processes racing: each gets `$n` handles on one
            // database (see `TestStore::handles`).
            $($(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $across() {
                    let under_test = super::$open().await;
                    let handles = under_test.handles($n).await;
                    $crate::common::store_cases::$concept::$across(handles).await;
                }
            )*)?
        }
    };
}

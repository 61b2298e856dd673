//! The domain: what tollgate is about, as values and pure rules. The spec
//! and its expressions, a run's stored state and events, the approval
//! record and its decision rules, signed links, and the lease rules of a
//! durable run. No I/O beyond reading the clock; refers only to support.

pub mod durable;
pub mod events;
pub mod expr;
pub mod form;
pub mod links;
pub mod notices;
pub mod pending_approval;
pub mod people;
pub mod policy;
pub mod run_state;
pub mod spec;
pub mod spec_version;

/// The names of the domain's enums (`named_enum!`) are stored and served.
#[cfg(test)]
mod names {
    use crate::domain::pending_approval::{ApprovalStatus, Phase};
    use crate::domain::policy::{Channel, OnTimeout, RejectWhen, VoteDecision};
    use crate::domain::run_state::RunStatus;
    use crate::domain::spec::OnSpecChange;

    /// The names are stored and served: the table, serde's names and
    /// `parse` agree, and none of them moved.
    #[test]
    fn every_name_round_trips_and_matches_serde() {
        fn check<T>(all: &[T], as_str: fn(&T) -> &'static str, parse: fn(&str) -> Option<T>)
        where
            T: serde::Serialize + PartialEq + std::fmt::Debug + std::fmt::Display,
        {
            for v in all {
                assert_eq!(parse(as_str(v)).as_ref(), Some(v));
                assert_eq!(serde_json::to_value(v).unwrap(), as_str(v));
                assert_eq!(v.to_string(), as_str(v));
            }
            assert_eq!(parse(""), None);
        }
        check(RunStatus::ALL, |v| v.as_str(), RunStatus::parse);
        check(ApprovalStatus::ALL, |v| v.as_str(), ApprovalStatus::parse);
        check(Phase::ALL, |v| v.as_str(), Phase::parse);
        check(OnSpecChange::ALL, |v| v.as_str(), OnSpecChange::parse);
        check(RejectWhen::ALL, |v| v.as_str(), RejectWhen::parse);
        check(OnTimeout::ALL, |v| v.as_str(), OnTimeout::parse);
        check(Channel::ALL, |v| v.as_str(), Channel::parse);
        check(VoteDecision::ALL, |v| v.as_str(), VoteDecision::parse);

        let names = |all: &[&str]| all.join(",");
        assert_eq!(
            names(
                &RunStatus::ALL
                    .iter()
                    .map(|v| v.as_str())
                    .collect::<Vec<_>>()
            ),
            "running,awaiting_approval,completed,rejected,failed,expired,skipped,stuck,cancelled"
        );
        assert_eq!(
            names(
                &ApprovalStatus::ALL
                    .iter()
                    .map(|v| v.as_str())
                    .collect::<Vec<_>>()
            ),
            "PENDING,APPROVED,REJECTED,MODIFIED,EXPIRED,CANCELLED"
        );
        assert_eq!(
            names(&Phase::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>()),
            "before,after"
        );
        assert_eq!(
            names(
                &OnSpecChange::ALL
                    .iter()
                    .map(|v| v.as_str())
                    .collect::<Vec<_>>()
            ),
            "refuse,pin,auto"
        );
        assert_eq!(RunStatus::parse("Running"), None, "names are exact");
        assert_eq!(ApprovalStatus::parse("pending"), None, "names are exact");
    }
}

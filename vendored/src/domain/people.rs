//! The people directory (DESIGN §15, issue 44): which identities are one
//! person. A person signs in through the organisation's provider, clicks
//! in Slack, opens a link sent to an address, or runs the CLI with a
//! token; the directory says that `alice@example.com`, `slack:U024BE7LH`
//! and the token `alice-cli` are all `alice`, so that every decision path
//! can check approvers, separation of duties and "a voter counts once"
//! against the person rather than the channel identity.
//!
//! The file (`TOLLGATE_PEOPLE_FILE`) lives outside the spec and its hash:
//! a joiner or a leaver must never change the hash and strand what waits.
//!
//! ```yaml
//! alice:
//!   emails: [alice@example.com]
//!   oidc: ["sub:00u1ab"]          # the provider's subject, or its name claim
//!   slack: [U024BE7LH]
//!   tokens: [alice-cli]
//!   operator: true
//! ```
//!
//! This module parses and checks the file (errors carry file:line:col) and
//! answers "whose identity is this"; it reads no environment and no clock.

use std::collections::HashMap;
use std::path::Path;

use crate::domain::policy::RESERVED_NAMES;
use crate::domain::spec::marked::{self, Node, NodeValue, Pos};

/// A person's fields in the file, in the order the errors list them.
const FIELDS: [&str; 5] = ["emails", "oidc", "slack", "tokens", "operator"];

/// One identity a caller presents, by channel.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Identity {
    /// An API token's name (`TOLLGATE_API_TOKENS`).
    Token(String),
    /// An email address, compared without regard to case.
    Email(String),
    /// A Slack user id (`U024BE7LH`).
    Slack(String),
    /// The provider's `sub` claim.
    OidcSubject(String),
    /// The provider's name claim (`TOLLGATE_OIDC_NAME_CLAIM`, by default
    /// the verified email).
    OidcName(String),
}

impl Identity {
    /// An email identity, in the one case it is compared in.
    pub fn email(address: &str) -> Identity {
        Identity::Email(address.trim().to_lowercase())
    }

    /// How the file writes it, for messages.
    pub fn describe(&self) -> String {
        match self {
            Identity::Token(name) => format!("token {name:?}"),
            Identity::Email(address) => format!("email {address:?}"),
            Identity::Slack(id) => format!("Slack user {id:?}"),
            Identity::OidcSubject(sub) => format!("oidc \"sub:{sub}\""),
            Identity::OidcName(name) => format!("oidc {name:?}"),
        }
    }
}

/// One person and the identities that are theirs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Person {
    pub name: String,
    pub identities: Vec<Identity>,
    /// May operate runs and notices (retry, fail, cancel) as a full-scope
    /// token may.
    pub operator: bool,
}

/// The directory: every person, and whose each identity is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct People {
    people: Vec<Person>,
    owner: HashMap<Identity, usize>,
}

/// Why a people file was refused: what, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}:{line}:{column}: {message}")]
pub struct PeopleError {
    pub origin: String,
    /// 1-based; 0 when the error has no position (the file cannot be read).
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl People {
    /// Read and check the file at `path`.
    #[expect(
        clippy::disallowed_methods,
        reason = "a people file is YAML, never a database file: whoever names the file must refuse the store's own path"
    )]
    pub fn load(path: &Path) -> Result<People, PeopleError> {
        let origin = path.display().to_string();
        let source = std::fs::read_to_string(path).map_err(|e| PeopleError {
            origin: origin.clone(),
            line: 0,
            column: 0,
            message: format!("cannot read the people file: {e}"),
        })?;
        People::parse(&source, &origin)
    }

    /// Parse and check a people file's text; `origin` names it in errors.
    pub fn parse(source: &str, origin: &str) -> Result<People, PeopleError> {
        // No people yet: a file with nothing but comments is an empty
        // directory (the YAML parser, written for specs, refuses it).
        if source.lines().all(|line| {
            let line = line.trim();
            line.is_empty() || line.starts_with('#') || line == "---"
        }) {
            return Ok(People::default());
        }
        let tree = marked::parse(source, origin).map_err(|e| PeopleError {
            origin: origin.to_string(),
            line: e.line,
            column: e.column,
            message: e.message,
        })?;
        let at = |pos: Pos, message: String| PeopleError {
            origin: origin.to_string(),
            line: pos.line,
            column: pos.column,
            message,
        };
        let entries = match &tree.root.value {
            NodeValue::Mapping(entries) => entries.as_slice(),
            _ if tree.root.is_null() => &[],
            _ => {
                return Err(at(
                    tree.root.pos,
                    format!(
                        "the people file is {}: write a mapping of names to people",
                        tree.root.type_name()
                    ),
                ));
            }
        };
        let mut people = People::default();
        // Where each identity was first written, for the error of a second.
        let mut written: HashMap<Identity, Pos> = HashMap::new();
        for entry in entries {
            let name = entry.key.as_str();
            if let Some(problem) = name_problem(name) {
                return Err(at(entry.key_pos, format!("person {name:?}: {problem}")));
            }
            let (identities, operator) = person_fields(&entry.value)
                .map_err(|(pos, message)| at(pos, format!("person {name:?}: {message}")))?;
            let index = people.people.len();
            let mut own = Vec::with_capacity(identities.len());
            for (identity, pos) in identities {
                if own.contains(&identity) {
                    continue; // written twice for the same person
                }
                if let Some(&other) = people.owner.get(&identity) {
                    let first = written[&identity];
                    return Err(at(
                        pos,
                        format!(
                            "{} is {}'s already (line {}): an identity belongs to one person",
                            identity.describe(),
                            people.people[other].name,
                            first.line
                        ),
                    ));
                }
                written.insert(identity.clone(), pos);
                people.owner.insert(identity.clone(), index);
                own.push(identity);
            }
            // A person's own name is a token name of theirs too: a token
            // named after the person is that person.
            let by_name = Identity::Token(name.to_string());
            match people.owner.get(&by_name) {
                Some(&other) if other != index => {
                    return Err(at(
                        entry.key_pos,
                        format!(
                            "person {name:?}: the token name {name:?} is {}'s already",
                            people.people[other].name
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    written.insert(by_name.clone(), entry.key_pos);
                    people.owner.insert(by_name.clone(), index);
                    own.push(by_name);
                }
            }
            people.people.push(Person {
                name: name.to_string(),
                identities: own,
                operator,
            });
        }
        Ok(people)
    }

    /// The person whose identity this is.
    pub fn person_of(&self, identity: &Identity) -> Option<&Person> {
        let key = match identity {
            Identity::Email(address) => Identity::email(address),
            other => other.clone(),
        };
        self.owner.get(&key).map(|&index| &self.people[index])
    }

    /// The person named `name`.
    pub fn person(&self, name: &str) -> Option<&Person> {
        self.people.iter().find(|p| p.name == name)
    }

    /// Every person, in the order the file lists them.
    pub fn people(&self) -> &[Person] {
        &self.people
    }

    pub fn is_empty(&self) -> bool {
        self.people.is_empty()
    }
}

/// Why `name` cannot name a person: it is written as a token's name may be
/// (so it reads the same in every log and ledger), and is none of the names
/// tollgate gives callers that hold no token.
fn name_problem(name: &str) -> Option<String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
    {
        return Some("use letters, digits, '-', '_', '.' and '@'".into());
    }
    RESERVED_NAMES
        .contains(&name)
        .then(|| format!("{name:?} is a name tollgate gives callers without a token"))
}

type FieldError = (Pos, String);

/// A person's identities (each with where it is written) and whether they
/// operate.
fn person_fields(node: &Node) -> Result<(Vec<(Identity, Pos)>, bool), FieldError> {
    let entries = match &node.value {
        NodeValue::Mapping(entries) => entries.as_slice(),
        _ if node.is_null() => &[],
        _ => {
            return Err((
                node.pos,
                format!(
                    "is {}: write a mapping with {}",
                    node.type_name(),
                    FIELDS.join(", ")
                ),
            ));
        }
    };
    let mut identities = Vec::new();
    let mut operator = false;
    for entry in entries {
        let field = entry.key.as_str();
        match field {
            "operator" => {
                operator = match entry.value.scalar().map(|s| s.resolved) {
                    Some(marked::Resolved::Bool(b)) => b,
                    _ => {
                        return Err((
                            entry.value.pos,
                            format!(
                                "operator is {}: write true or false",
                                entry.value.type_name()
                            ),
                        ));
                    }
                };
            }
            "emails" | "oidc" | "slack" | "tokens" => {
                for (text, pos) in strings(&entry.value, field)? {
                    let identity = identity(field, text)
                        .map_err(|message| (pos, format!("{field}: {text:?}: {message}")))?;
                    identities.push((identity, pos));
                }
            }
            other => {
                return Err((
                    entry.key_pos,
                    format!(
                        "unknown field {other:?}: a person has {}",
                        FIELDS.join(", ")
                    ),
                ));
            }
        }
    }
    Ok((identities, operator))
}

/// The strings of a list field (a single string counts as a list of one).
fn strings<'n>(node: &'n Node, field: &str) -> Result<Vec<(&'n str, Pos)>, FieldError> {
    let items: Vec<&Node> = match &node.value {
        NodeValue::Sequence(items) => items.iter().collect(),
        NodeValue::Scalar(_) if node.as_str().is_some() => vec![node],
        _ => {
            return Err((
                node.pos,
                format!("{field} is {}: write a list of strings", node.type_name()),
            ));
        }
    };
    items
        .into_iter()
        .map(|item| {
            item.as_str().map(|text| (text, item.pos)).ok_or_else(|| {
                (
                    item.pos,
                    format!("{field}: an entry is {}: write a string", item.type_name()),
                )
            })
        })
        .collect()
}

/// The identity `text` names in `field`, or why it cannot be one.
fn identity(field: &str, text: &str) -> Result<Identity, String> {
    let text = text.trim();
    match field {
        "emails" => {
            let (local, domain) = text.split_once('@').ok_or("not an email address")?;
            if local.is_empty() || domain.is_empty() || domain.contains('@') || text.contains(' ') {
                return Err("not an email address".into());
            }
            Ok(Identity::email(text))
        }
        "oidc" => match text.strip_prefix("sub:") {
            Some(sub) if !sub.is_empty() => Ok(Identity::OidcSubject(sub.to_string())),
            Some(_) => Err("\"sub:\" needs the subject after it".into()),
            None if text.is_empty() => Err("empty".into()),
            None => Ok(Identity::OidcName(text.to_string())),
        },
        "slack" => {
            let id = text.strip_prefix("slack:").unwrap_or(text);
            let well_formed = id.len() > 1
                && (id.starts_with('U') || id.starts_with('W'))
                && id
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
            if !well_formed {
                return Err("a Slack user id is U or W and capitals and digits".into());
            }
            Ok(Identity::Slack(id.to_string()))
        }
        _ => match name_problem(text) {
            Some(problem) => Err(problem),
            None => Ok(Identity::Token(text.to_string())),
        },
    }
}

#[cfg(test)]
mod tests;

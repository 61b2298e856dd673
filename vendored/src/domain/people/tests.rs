use super::*;

const FILE: &str = "\
alice:
  emails: [Alice@Example.com]
  oidc: [\"sub:00u1ab\", alice@corp.example]
  slack: [U024BE7LH]
  tokens: [alice-cli]
  operator: true
bob:
  emails: bob@example.com
carol: {}
";

fn parse(source: &str) -> Result<People, PeopleError> {
    People::parse(source, "people.yaml")
}

fn refused(source: &str) -> PeopleError {
    parse(source).expect_err("refused")
}

#[test]
fn every_identity_of_a_person_resolves_to_them() {
    let people = parse(FILE).expect("parses");
    let name_of = |identity: Identity| people.person_of(&identity).map(|p| p.name.clone());
    for identity in [
        Identity::email("alice@example.com"),
        Identity::Email("ALICE@EXAMPLE.COM".into()),
        Identity::OidcSubject("00u1ab".into()),
        Identity::OidcName("alice@corp.example".into()),
        Identity::Slack("U024BE7LH".into()),
        Identity::Token("alice-cli".into()),
        Identity::Token("alice".into()),
    ] {
        assert_eq!(
            name_of(identity.clone()),
            Some("alice".into()),
            "{identity:?}"
        );
    }
    assert_eq!(
        name_of(Identity::email("bob@example.com")),
        Some("bob".into())
    );
    assert_eq!(
        name_of(Identity::Token("carol".into())),
        Some("carol".into())
    );
    assert_eq!(name_of(Identity::Token("dave".into())), None);
    assert_eq!(name_of(Identity::Slack("U999".into())), None);
    assert_eq!(
        name_of(Identity::OidcName("00u1ab".into())),
        None,
        "a subject is not a name"
    );
    let alice = people.person("alice").expect("alice");
    assert!(alice.operator);
    assert!(!people.person("bob").expect("bob").operator);
    let names: Vec<&str> = people.people().iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["alice", "bob", "carol"], "in the file's order");
}

#[test]
fn an_empty_file_is_an_empty_directory() {
    assert!(parse("").expect("parses").is_empty());
    assert!(parse("# nobody yet\n").expect("parses").is_empty());
}

#[test]
fn an_identity_of_two_people_is_refused_where_it_is_written_again() {
    let error = refused("alice:\n  emails: [a@x.example]\nbob:\n  emails: [A@X.example]\n");
    assert_eq!((error.line, error.column), (4, 12), "{error}");
    assert!(
        error.message.contains("alice's already (line 2)"),
        "{error}"
    );
    let error = refused("alice: {}\nbob:\n  tokens: [alice]\n");
    assert_eq!(error.line, 3, "{error}");
    assert!(
        error.message.contains("token \"alice\" is alice's"),
        "{error}"
    );
    let error = refused("alice:\n  tokens: [bob]\nbob: {}\n");
    assert_eq!((error.line, error.column), (3, 1), "{error}");
    assert!(
        error.message.contains("the token name \"bob\" is alice's"),
        "{error}"
    );
    // The same identity twice for one person is one identity.
    let people = parse("alice:\n  slack: [U1, slack:U1]\n").expect("parses");
    assert_eq!(people.person("alice").expect("alice").identities.len(), 2);
}

#[test]
fn bad_input_is_refused_with_file_line_and_column() {
    for (source, at, says) in [
        ("- alice\n", (1, 1), "write a mapping of names to people"),
        ("al ice: {}\n", (1, 1), "use letters, digits"),
        (
            "local: {}\n",
            (1, 1),
            "a name tollgate gives callers without a token",
        ),
        ("alice: [a]\n", (1, 8), "write a mapping with emails, oidc"),
        (
            "alice:\n  email: [a@b.c]\n",
            (2, 3),
            "unknown field \"email\": a person has emails",
        ),
        (
            "alice:\n  emails: [nobody]\n",
            (2, 12),
            "not an email address",
        ),
        (
            "alice:\n  emails: {a: b}\n",
            (2, 11),
            "write a list of strings",
        ),
        ("alice:\n  emails: [7]\n", (2, 12), "write a string"),
        ("alice:\n  slack: [u024]\n", (2, 11), "a Slack user id"),
        ("alice:\n  oidc: [\"sub:\"]\n", (2, 10), "needs the subject"),
        (
            "alice:\n  tokens: [\"two words\"]\n",
            (2, 12),
            "use letters, digits",
        ),
        (
            "alice:\n  operator: yes please\n",
            (2, 13),
            "write true or false",
        ),
        ("alice: {\n", (0, 0), ""),
    ] {
        let error = refused(source);
        assert_eq!(error.origin, "people.yaml", "{source:?}");
        if at != (0, 0) {
            assert_eq!((error.line, error.column), at, "{source:?}: {error}");
        } else {
            assert!(error.line > 0, "a YAML error has a place: {error}");
        }
        assert!(error.message.contains(says), "{source:?}: {error}");
        assert!(
            error.to_string().starts_with("people.yaml:"),
            "file:line:col first: {error}"
        );
    }
}

#[test]
fn an_unreadable_file_says_so() {
    let error = People::load(Path::new("/no/such/people.yaml")).expect_err("missing");
    assert_eq!((error.line, error.column), (0, 0));
    assert!(
        error.message.contains("cannot read the people file"),
        "{error}"
    );
}

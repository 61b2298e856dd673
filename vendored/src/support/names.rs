//! Enums whose variants have one fixed name each (statuses, phases, roles):
//! the name as stored, served and printed, declared once next to the variant.
//!
//! [`named_enum!`](crate::named_enum) writes the enum with `as_str`,
//! `parse` (its inverse), `ALL` and `Display` from one table. A small macro
//! rather than `strum`: strum reaches exports only through croner, and its
//! derive would tie every export's build to that proc-macro chain.

/// Declare a field-less enum and its name table:
///
/// ```
/// tollgate_runtime::named_enum! {
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub enum Light {
///         Red = "red",
///         Green = "green",
///     }
/// }
/// assert_eq!(Light::Red.as_str(), "red");
/// assert_eq!(Light::parse("green"), Some(Light::Green));
/// assert_eq!(Light::parse("blue"), None);
/// assert_eq!(Light::ALL, [Light::Red, Light::Green]);
/// assert_eq!(Light::Green.to_string(), "green");
/// ```
///
/// Attributes (docs, derives, serde) pass through to the enum and its
/// variants. A serde `rename_all` must produce the same names: each user
/// tests that against `ALL`.
#[macro_export]
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The variant's name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text ),+
                }
            }

            /// The variant with this exact name.
            pub fn parse(s: &str) -> Option<$name> {
                match s {
                    $( $text => Some($name::$variant), )+
                    _ => None,
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

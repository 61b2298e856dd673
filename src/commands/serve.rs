//! `tollgate serve`: the HTTP server of DESIGN §5, the same code an
//! exported server runs (`tollgate_runtime::server`).

use tollgate_runtime::server::{self, ApiTokens, Server, ServerConfig};

use crate::cli::ServeArgs;
use crate::exit::{self, Failure};

pub async fn run(args: ServeArgs) -> Result<i32, Failure> {
    server::init_logging();
    let spec = super::load_spec(&args.spec)?;
    let shutdown_grace = tollgate_runtime::time::parse_duration(&args.shutdown_grace)
        .map_err(|e| Failure::bad_input(format!("--shutdown-grace: {e}")))?;
    // Read by hand, not through clap's `env`, so the help text can never
    // show a token.
    let tokens = ApiTokens::from_env().map_err(|e| Failure::bad_input(e.to_string()))?;
    let store = crate::state::open(&args.store, Some(&args.spec))?;
    let agent = super::agent(spec, store)?;
    let config = ServerConfig {
        listen: args.listen,
        tokens,
        max_body_bytes: args.max_body_bytes,
        shutdown_grace,
        ..ServerConfig::default()
    };
    let server = Server::bind(agent, config).await.map_err(failure)?;
    server::announce(server.local_addr().map_err(failure)?);
    server.run().await.map_err(failure)?;
    Ok(exit::OK)
}

fn failure(e: server::ServerError) -> Failure {
    let code = if e.is_config() {
        exit::BAD_INPUT
    } else {
        exit::RUN_FAILED
    };
    Failure::new(code, e.to_string())
}

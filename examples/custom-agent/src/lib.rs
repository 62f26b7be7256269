//! A travel agent on think-rs: the Think harness with one tool of its own, `distance`, and
//! its own system prompt. Everything else (the workspace tools, approvals, durable turns, the
//! chat protocol) comes from the crates.

use serde::{Deserialize, Serialize};
use think_core::agent::{AgentSpec, ModelChoice};
use think_core::tools::{typed_tool, ToolError};

/// The input of `distance`; its JSON Schema is derived, and the model's input is checked
/// against it before the tool runs.
#[derive(Deserialize, schemars::JsonSchema)]
pub struct DistanceInput {
    /// The city the trip starts from, e.g. "Lisbon".
    pub from: String,
    /// The city the trip ends in.
    pub to: String,
}

/// What `distance` returns to the model.
#[derive(Serialize, Debug, PartialEq)]
pub struct Distance {
    /// The great-circle distance, in kilometres.
    pub km: u32,
}

/// A few cities and their coordinates (degrees).
const CITIES: &[(&str, f64, f64)] =
    &[("lisbon", 38.72, -9.14), ("paris", 48.86, 2.35), ("berlin", 52.52, 13.40)];

/// The great-circle distance between two known cities.
pub fn distance(input: &DistanceInput) -> Result<Distance, ToolError> {
    let find = |name: &str| {
        let key = name.trim().to_lowercase();
        CITIES.iter().find(|c| c.0 == key).ok_or_else(|| {
            let known: Vec<&str> = CITIES.iter().map(|c| c.0).collect();
            ToolError::Failed(format!("Unknown city {name:?}; known: {}", known.join(", ")))
        })
    };
    let (a, b) = (find(&input.from)?, find(&input.to)?);
    let (la1, lo1, la2, lo2) =
        (a.1.to_radians(), a.2.to_radians(), b.1.to_radians(), b.2.to_radians());
    let h = ((la2 - la1) / 2.0).sin().powi(2)
        + la1.cos() * la2.cos() * ((lo2 - lo1) / 2.0).sin().powi(2);
    Ok(Distance { km: (2.0 * 6371.0 * h.sqrt().asin()).round() as u32 })
}

/// The agent: a model from the settings, the prompt, and the tool.
pub fn spec(setting: impl Fn(&str) -> Option<String>) -> AgentSpec {
    let model = ModelChoice::from_settings(
        setting("MODEL_BASE_URL").as_deref(),
        setting("MODEL_API_KEY").as_deref(),
        setting("MODEL").as_deref(),
    );
    AgentSpec::new(model)
        .system_prompt("You plan trips. Use the distance tool for distances between cities.")
        .tool(typed_tool(
            "distance",
            "The distance between two cities, in km",
            |input: DistanceInput, _ctx| async move { distance(&input) },
        ))
}

#[cfg(target_arch = "wasm32")]
mod worker_glue {
    use worker::{event, Context, Env, Request, Response, Result};

    think_worker::think_agent!(TravelAgent, |env: &worker::Env| {
        super::spec(|name| env.var(name).ok().map(|v| v.to_string()))
    });

    #[event(fetch)]
    async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
        match think_worker::route_agent_request(req, &env).await? {
            Some(response) => Ok(response),
            None => Response::error("Not found", 404),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_between_known_cities_and_an_error_for_others() {
        let d = |from: &str, to: &str| {
            distance(&DistanceInput { from: from.into(), to: to.into() }).map(|d| d.km)
        };
        assert_eq!(d("Lisbon", "Paris").unwrap(), 1453);
        assert_eq!(d("paris", "paris").unwrap(), 0);
        let err = d("Lisbon", "Atlantis").unwrap_err().to_string();
        assert!(err.contains("Unknown city \"Atlantis\""), "{err}");
    }
}

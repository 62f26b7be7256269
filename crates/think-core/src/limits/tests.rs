//! The limits' windows and counters over real SQLite and a manual clock.

use std::rc::Rc;

use serde_json::json;

use super::*;
use crate::store::sqlite::SqliteSql;
use crate::test_support::{ManualClock, START_MS};

fn meter(limits: Limits) -> (Meter, Rc<ManualClock>, Rc<SqliteSql>) {
    let clock = ManualClock::new();
    let sql = Rc::new(SqliteSql::new());
    (Meter::new(sql.clone(), clock.clone(), limits), clock, sql)
}

fn hit_of(refused: TurnRefused) -> LimitHit {
    match refused {
        TurnRefused::Limit(hit) => hit,
        other => panic!("expected a used-up limit, got {other:?}"),
    }
}

fn usage(input: u64, output: u64) -> Usage {
    Usage { input_tokens: input, output_tokens: output }
}

#[test]
fn the_setting_reads_both_forms_and_refuses_the_rest() {
    assert_eq!(Limits::parse("").unwrap(), Limits::default());
    assert_eq!(
        Limits::parse(r#"{"turnsPerMinute": 20, "tokensPerDay": 1000000}"#).unwrap(),
        Limits::default().turns_per_minute(20).tokens_per_day(1_000_000)
    );
    let general = Limits::parse(r#"{"turns": {"max": 2, "windowMs": 3000}}"#).unwrap();
    assert_eq!(general.turns, Some(Limit { max: 2, window_ms: 3000, name: "turns".into() }));
    assert_eq!(general.tokens, None);
    for bad in [
        "20",
        r#"{"turnsPerMinute": -1}"#,
        r#"{"turnsPerMinute": 1.5}"#,
        r#"{"turnsPerHour": 1}"#,
        r#"{"turns": {"max": 2}}"#,
        r#"{"turns": {"max": 2, "windowMs": 0}}"#,
        r#"{"turns": {"max": 2, "windowMs": 10}, "turnsPerMinute": 3}"#,
    ] {
        assert!(Limits::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn turns_are_refused_once_used_up_until_the_window_closes() {
    let (m, clock, _) = meter(Limits::default().turns_per_minute(2));
    assert_eq!(m.admit_turn(), Ok(()));
    clock.advance(10_000.0);
    assert_eq!(m.admit_turn(), Ok(()));
    clock.advance(5_000.0);
    let hit = hit_of(m.admit_turn().unwrap_err());
    assert_eq!(hit.resets_at, START_MS + 60_000.0, "the window opened with the first turn");
    assert_eq!(hit.unit, "turns");
    let text = hit.to_string();
    assert!(text.contains("turnsPerMinute (2 turns per minute)"), "{text}");
    assert!(text.contains("resets at 1970-01-01T00:17:40Z (in 45 s)"), "{text}");
    // A refused turn is not counted: the window still holds two.
    assert_eq!(m.report().unwrap()["turns"]["used"], 2);
    clock.advance(44_999.0);
    assert!(m.admit_turn().is_err(), "still inside the window");
    clock.advance(1.0);
    assert_eq!(m.admit_turn(), Ok(()), "a new window opens");
    let report = m.report().unwrap();
    assert_eq!(report["turns"]["used"], 1);
    assert_eq!(report["turns"]["resetsAt"], json!((START_MS + 120_000.0) as i64));
}

#[test]
fn tokens_count_input_and_output_and_stop_the_next_turn() {
    let (m, clock, _) = meter(Limits::default().tokens_per_day(100));
    assert_eq!(m.admit_turn(), Ok(()));
    m.record_tokens(&usage(60, 30));
    assert_eq!(m.admit_turn(), Ok(()), "90 of 100 used");
    m.record_tokens(&usage(20, 5));
    let hit = hit_of(m.admit_turn().unwrap_err());
    assert!(hit.to_string().contains("tokensPerDay (100 tokens per day)"), "{hit}");
    let report = m.report().unwrap();
    assert_eq!(
        report["tokens"],
        json!({
            "used": 115, "input": 80, "output": 35, "limit": 100, "name": "tokensPerDay",
            "windowMs": DAY_MS, "resetsAt": (START_MS as i64) + DAY_MS as i64,
        })
    );
    assert_eq!(report["turns"]["limit"], json!(null), "turns are counted without a limit");
    assert_eq!(report["turns"]["used"], 2);
    clock.advance(DAY_MS as f64);
    assert_eq!(m.admit_turn(), Ok(()));
    assert_eq!(m.report().unwrap()["tokens"]["used"], 0);
}

#[test]
fn unreadable_limits_refuse_every_turn_naming_why_and_count_none() {
    let (m, _, _) = meter(Limits::refuse_all("expected a JSON object, not \"20/min\""));
    for _ in 0..2 {
        let refused = m.admit_turn().unwrap_err();
        assert!(matches!(refused, TurnRefused::Unreadable(_)), "{refused:?}");
        let text = refused.to_string();
        assert!(
            text.contains(
                "THINK_LIMITS could not be read (expected a JSON object, not \"20/min\")"
            ),
            "{text}"
        );
    }
    assert_eq!(m.report().unwrap()["turns"]["used"], 0, "a refused turn is not counted");
}

#[test]
fn counters_survive_a_new_meter_on_the_same_storage() {
    let (m, clock, sql) = meter(Limits::default().turns_per_minute(1));
    assert_eq!(m.admit_turn(), Ok(()));
    let again = Meter::new(sql, clock, Limits::default().turns_per_minute(1));
    assert!(again.admit_turn().is_err(), "an eviction does not reset the window");
}

#[test]
fn metered_models_count_what_the_provider_reports() {
    use crate::model::FinishReason;
    use crate::test_support::ScriptedModel;
    let (m, _, _) = meter(Limits::default());
    let m = Rc::new(m);
    let model = ScriptedModel::new(vec![
        vec![
            ModelEvent::TextDelta("hi".into()),
            ModelEvent::Finish { reason: FinishReason::Stop, usage: Some(usage(7, 3)) },
        ],
        vec![ModelEvent::Finish { reason: FinishReason::Stop, usage: None }],
    ]);
    let metered = Metered::new(model, m.clone());
    futures::executor::block_on(async {
        for _ in 0..2 {
            let stream = metered.stream(&ModelRequest::default()).await.unwrap();
            let _: Vec<_> = stream.collect().await;
        }
    });
    assert_eq!(m.report().unwrap()["tokens"]["used"], 10);
}

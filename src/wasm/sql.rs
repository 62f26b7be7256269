//! `Sql` over the Durable Object's SQLite (`ctx.storage.sql`).

use js_sys::{Function, Reflect};
use wasm_bindgen::{closure::ScopedClosure, JsCast, JsValue};
use worker::{SqlStorage, SqlStorageValue};

use crate::store::{Row, Sql, SqlValue, StoreError};

pub struct DoSql {
    sql: SqlStorage,
    /// `ctx.storage`, for `transactionSync`.
    storage: JsValue,
}

impl DoSql {
    pub fn new(state: &worker::State) -> Self {
        let storage = state.storage();
        let raw: &JsValue = storage.as_raw().as_ref();
        Self { sql: storage.sql(), storage: raw.clone() }
    }
}

fn to_do(v: &SqlValue) -> SqlStorageValue {
    match v {
        SqlValue::Null => SqlStorageValue::Null,
        SqlValue::Integer(i) => SqlStorageValue::Integer(*i),
        SqlValue::Real(f) => SqlStorageValue::Float(*f),
        SqlValue::Text(s) => SqlStorageValue::String(s.clone()),
        SqlValue::Blob(b) => SqlStorageValue::Blob(b.clone()),
    }
}

fn from_do(v: SqlStorageValue) -> SqlValue {
    match v {
        SqlStorageValue::Null => SqlValue::Null,
        SqlStorageValue::Boolean(b) => SqlValue::Integer(b as i64),
        SqlStorageValue::Integer(i) => SqlValue::Integer(i),
        SqlStorageValue::Float(f) => SqlValue::Real(f),
        SqlStorageValue::String(s) => SqlValue::Text(s),
        SqlStorageValue::Blob(b) => SqlValue::Blob(b),
    }
}

impl Sql for DoSql {
    fn exec(&self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>, StoreError> {
        let cursor = self
            .sql
            .exec(sql, params.iter().map(to_do).collect::<Vec<_>>())
            .map_err(|e| StoreError(e.to_string()))?;
        cursor
            .raw()
            .map(|row| row.map(|r| r.into_iter().map(from_do).collect()).map_err(|e| StoreError(e.to_string())))
            .collect()
    }

    fn transaction(&self, f: &mut dyn FnMut() -> Result<(), StoreError>) -> Result<(), StoreError> {
        let tx: Function = Reflect::get(&self.storage, &"transactionSync".into())
            .ok()
            .and_then(|f| f.dyn_into::<Function>().ok())
            .ok_or_else(|| StoreError("transactionSync is not available".into()))?;
        let mut failure: Option<StoreError> = None;
        let outcome = {
            // transactionSync rolls back when its callback throws, so an Err is thrown.
            let mut body = || -> Result<JsValue, JsValue> {
                f().map_err(|e| {
                    let js = JsValue::from_str(&e.0);
                    failure = Some(e);
                    js
                })?;
                Ok(JsValue::UNDEFINED)
            };
            let closure = ScopedClosure::<dyn FnMut() -> Result<JsValue, JsValue>>::borrow_mut_aborting(&mut body);
            tx.call1(&self.storage, closure.as_js_value())
        };
        match (outcome, failure) {
            (_, Some(e)) => Err(e),
            (Ok(_), None) => Ok(()),
            (Err(e), None) => Err(StoreError(e.as_string().unwrap_or_else(|| format!("{e:?}")))),
        }
    }
}

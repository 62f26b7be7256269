//! OAuth tokens: refreshing them before they expire or after a 401, starting an
//! authorization a server demands, and completing it from the callback.

use super::{with_timeout, ConnectionState, Inner, McpClient};
use crate::mcp::oauth::{self, AuthRecord, CallbackParams, OAuth, OAuthError};
use crate::mcp::session::Session;
use crate::mcp::store;
use crate::mcp::McpError;
use crate::net;
use std::rc::Rc;

impl Inner {
    fn oauth(&self) -> OAuth<'_> {
        OAuth {
            http: self.http.as_ref(),
            clock: self.clock.as_ref(),
            policy: self.config.net_policy(),
            client_name: &self.config.client_name,
        }
    }

    /// The access token the server's requests send now.
    pub(super) fn bearer(&self, id: &str) -> Option<String> {
        self.with_server(id, |s| s.bearer.borrow().clone()).flatten()
    }

    pub(super) fn has_refresh_token(&self, id: &str) -> bool {
        self.with_server(id, |s| {
            s.auth
                .as_ref()
                .and_then(|a| a.tokens.as_ref())
                .is_some_and(|t| t.refresh_token.is_some())
        })
        .unwrap_or(false)
    }

    /// Persists `record` first, then installs it and its access token in memory.
    pub(super) fn set_auth(&self, id: &str, record: AuthRecord) -> Result<(), McpError> {
        store::save_auth(self.sql.as_ref(), id, Some(&record))?;
        self.with_server(id, |s| {
            *s.bearer.borrow_mut() = record.tokens.as_ref().map(|t| t.access_token.clone());
            s.auth = Some(record);
        });
        Ok(())
    }

    /// Refreshes the tokens of `id`, unless someone refreshed them since the caller saw
    /// `seen` (then the caller just uses the new ones).
    pub(super) async fn refresh_tokens(
        &self,
        id: &str,
        seen: Option<&str>,
    ) -> Result<(), McpError> {
        let _lock = self.auth_lock.lock().await;
        let record = self
            .with_server(id, |s| s.auth.clone())
            .flatten()
            .ok_or_else(|| McpError::UnknownServer(id.into()))?;
        let current = record.tokens.as_ref().map(|t| t.access_token.as_str());
        if current != seen {
            return Ok(());
        }
        let tokens = self.oauth().refresh(&record).await?;
        self.set_auth(id, AuthRecord { tokens: Some(tokens), ..record })
    }

    /// Refreshes tokens about to expire, before a request would be refused with them. A
    /// failed refresh is left to the request: its 401 starts a new authorization.
    pub(super) async fn refresh_if_due(&self, id: &str) {
        let now = self.clock.now_ms();
        let due = self
            .with_server(id, |s| {
                let tokens = s.auth.as_ref()?.tokens.as_ref()?;
                tokens.refresh_due(now).then(|| tokens.access_token.clone())
            })
            .flatten();
        if let Some(seen) = due {
            let _ = self.refresh_tokens(id, Some(&seen)).await;
        }
    }

    /// After a 401 the tokens could not fix: discovers the authorization server, registers a
    /// client if needed and stores a new pending authorization. Returns
    /// `AuthorizationRequired(url)`, or why OAuth could not start.
    pub(super) async fn begin_authorization(&self, id: &str, challenge: Option<&str>) -> McpError {
        let started = self.clock.now_ms();
        let _lock = self.auth_lock.lock().await;
        self.begin_locked(id, challenge, started).await
    }

    /// [`Self::begin_authorization`] with `auth_lock` held. An authorization another caller
    /// began after `started` is reused rather than replaced.
    async fn begin_locked(&self, id: &str, challenge: Option<&str>, started: f64) -> McpError {
        let Some((url, callback, record)) = self
            .with_server(id, |s| (s.row.url.clone(), s.row.callback_url.clone(), s.auth.clone()))
        else {
            return McpError::UnknownServer(id.into());
        };
        if let Some(p) =
            record.as_ref().filter(|r| r.tokens.is_none()).and_then(|r| r.pending.as_ref())
        {
            if p.created_at >= started {
                return McpError::AuthorizationRequired(p.auth_url.clone());
            }
        }
        let url = match net::check_url(&url, &self.config.net_policy()) {
            Ok(u) => u,
            Err(e) => return e.into(),
        };
        let challenge = oauth::parse_challenge(challenge.unwrap_or_default());
        let mut record = record.unwrap_or_default();
        let began = with_timeout(
            self.clock.as_ref(),
            self.config.connect_timeout_ms,
            self.oauth().begin(&url, &challenge, &mut record, callback.as_deref()),
        )
        .await;
        match began {
            Some(Ok(auth_url)) => match self.set_auth(id, record) {
                Ok(()) => McpError::AuthorizationRequired(auth_url),
                Err(e) => e,
            },
            Some(Err(e @ OAuthError::NoCallback)) => e.into(),
            // A server that asked for a token it does not issue itself (or a static one).
            Some(Err(OAuthError::Discovery(_))) if challenge.resource_metadata.is_none() => {
                McpError::Transport(
                    "HTTP 401: Unauthorized (the server offers no OAuth metadata)".into(),
                )
            }
            Some(Err(e)) => McpError::Transport(format!(
                "HTTP 401: Unauthorized, and OAuth could not start: {e}"
            )),
            None => McpError::Timeout(self.config.connect_timeout_ms),
        }
    }

    /// A live session was refused and could not be re-authorized: waits for the user if a new
    /// authorization began, else fails like any broken connection.
    pub(super) fn apply_auth_lost(&self, id: &str, session: &Rc<Session>, e: &McpError) {
        if !matches!(e, McpError::AuthorizationRequired(_)) {
            self.mark_failed(id, session, e);
            return;
        }
        self.apply_authenticating(id, None);
    }

    /// Puts the server in `authenticating` (its pending authorization holds the URL), with an
    /// error saying why when a previous attempt went wrong.
    fn apply_authenticating(&self, id: &str, error: Option<String>) {
        self.with_server(id, |s| {
            s.session = None;
            s.task = None;
            s.attempt += 1;
            s.state = ConnectionState::Authenticating;
            s.error = error;
            s.failed_at = None;
        });
        self.changed();
    }
}

impl McpClient {
    /// Whether `path` is the OAuth callback path of a registered server.
    pub fn is_callback_path(&self, path: &str) -> bool {
        self.inner.servers.borrow().iter().any(|s| {
            s.row
                .callback_url
                .as_deref()
                .and_then(|u| net::Url::parse(u).ok())
                .is_some_and(|u| u.path() == path)
        })
    }

    /// Completes an authorization from the callback's query (`code`, `state`): the state must
    /// match an authorization in progress, and is used up before anything else happens; a
    /// wrong or replayed one changes nothing. The code is exchanged for tokens and the server
    /// connects. Returns the server's id.
    pub async fn complete_authorization(&self, query: &str) -> Result<String, McpError> {
        let inner = &self.inner;
        let params = CallbackParams::parse(query);
        let state = params.state.ok_or(OAuthError::UnknownState)?;
        let lock = inner.auth_lock.lock().await;
        let found = inner.servers.borrow().iter().find_map(|s| {
            let record = s.auth.as_ref()?;
            let pending = record.pending.as_ref()?;
            oauth::same_secret(&pending.state, &state).then(|| (s.row.id.clone(), record.clone()))
        });
        let (id, mut record) = found.ok_or(OAuthError::UnknownState)?;
        let pending = record.pending.take().ok_or(OAuthError::UnknownState)?;
        inner.set_auth(&id, record.clone())?;
        let now = inner.clock.now_ms();
        let outcome = match (params.error, params.code) {
            (Some(error), _) => Err(OAuthError::Denied(error)),
            _ if now - pending.created_at >= oauth::PENDING_TTL_MS => {
                Err(OAuthError::Denied("the authorization expired".into()))
            }
            (None, None) => Err(OAuthError::Denied("the callback carries no code".into())),
            (None, Some(code)) => inner.oauth().exchange(&record, &pending, &code).await,
        };
        let tokens = match outcome {
            Ok(tokens) => tokens,
            Err(e) => {
                // The user can try again at a new URL.
                let again = inner.begin_locked(&id, None, now).await;
                match again {
                    McpError::AuthorizationRequired(_) => {
                        inner.apply_authenticating(&id, Some(e.to_string()))
                    }
                    other => inner.apply_failed_now(&id, &other),
                }
                return Err(e.into());
            }
        };
        inner.set_auth(&id, AuthRecord { tokens: Some(tokens), ..record })?;
        drop(lock);
        inner.with_server(&id, |s| {
            s.task = None;
            s.attempt += 1;
            s.failed_at = None;
        });
        if let Some(task) = inner.start_connect(&id, 1) {
            task.await;
        }
        Ok(id)
    }
}

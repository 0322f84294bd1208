//! A small client of Prometheus's HTTP API: instant queries (`/api/v1/query`), as the
//! rebalancer's `--telemetry prometheus` and the tests use them.

use std::collections::BTreeMap;
use std::time::Duration;

/// Why a Prometheus request failed. None of the variants carries a credential: URLs are shown
/// without their user information.
#[derive(Debug, thiserror::Error)]
pub enum PrometheusError {
    /// The URL is not `http://HOST:PORT[/PATH]` or `https://...`.
    #[error("--prometheus-url {0:?} is not an http:// or https:// URL")]
    BadUrl(String),
    /// The server could not be reached or did not answer in time.
    #[error("Prometheus at {url} is unreachable: {reason}")]
    Unreachable {
        /// The server's URL.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The server answered with an HTTP error.
    #[error("Prometheus at {url} answered {path} with HTTP {status}: {body}")]
    Http {
        /// The server's URL.
        url: String,
        /// The path asked.
        path: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The answer was not the JSON the API documents.
    #[error(
        "Prometheus at {url} answered {path} with something that is not its API's JSON: {reason}"
    )]
    BadAnswer {
        /// The server's URL.
        url: String,
        /// The path asked.
        path: String,
        /// What did not fit.
        reason: String,
    },
    /// Prometheus refused the query (a syntax error, say).
    #[error("Prometheus refused the query {query:?}: {error}")]
    QueryFailed {
        /// The PromQL.
        query: String,
        /// Prometheus's `errorType: error`.
        error: String,
    },
    /// The query returned no series (the query, quoted, and what was looked for).
    #[error(
        "the query {0} returned no series: is the exporter scraped, and are its labels as configured?"
    )]
    NoSeries(String),
}

/// One sample of an instant vector.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The series' labels, `__name__` included when Prometheus returns it.
    pub labels: BTreeMap<String, String>,
    /// Unix time of the sample, in seconds.
    pub timestamp: f64,
    /// The value (`NaN` and infinities as Prometheus writes them).
    pub value: f64,
}

/// A client of one Prometheus server.
#[derive(Clone)]
pub struct PrometheusClient {
    base: String,
    shown: String,
    agent: ureq::Agent,
}

impl std::fmt::Debug for PrometheusClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusClient")
            .field("url", &self.shown)
            .finish()
    }
}

impl PrometheusClient {
    /// A client of the server at `url` (`http://host:port`, with an optional path prefix),
    /// with a 5 s timeout per request.
    pub fn new(url: &str) -> Result<PrometheusClient, PrometheusError> {
        let base = url.trim_end_matches('/');
        let Some((scheme, rest)) = base.split_once("://") else {
            return Err(PrometheusError::BadUrl(redact(url)));
        };
        if !matches!(scheme, "http" | "https") || rest.is_empty() {
            return Err(PrometheusError::BadUrl(redact(url)));
        }
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(5)))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(PrometheusClient {
            base: base.to_string(),
            shown: redact(base),
            agent,
        })
    }

    /// The server's URL as it may be shown (without user information).
    pub fn url(&self) -> &str {
        &self.shown
    }

    /// `GET path` (with `query` parameters); the body of a 2xx answer.
    fn request(&self, path: &str, query: &[(&str, &str)]) -> Result<String, PrometheusError> {
        let mut request = self.agent.get(format!("{}{path}", self.base));
        for (key, value) in query {
            request = request.query(*key, *value);
        }
        let mut response = request.call().map_err(|e| PrometheusError::Unreachable {
            url: self.shown.clone(),
            reason: e.to_string(),
        })?;
        let status = response.status().as_u16();
        let body =
            response
                .body_mut()
                .read_to_string()
                .map_err(|e| PrometheusError::Unreachable {
                    url: self.shown.clone(),
                    reason: e.to_string(),
                })?;
        if (200..300).contains(&status)
            || (status == 400 || status == 422) && path.contains("/api/")
        {
            // The API answers a refused query with 400 or 422 and a JSON error body.
            Ok(body)
        } else {
            Err(PrometheusError::Http {
                url: self.shown.clone(),
                path: path.to_string(),
                status,
                body: body.chars().take(200).collect(),
            })
        }
    }

    /// `GET path`; the body of a 2xx answer.
    pub fn get(&self, path: &str) -> Result<String, PrometheusError> {
        self.request(path, &[])
    }

    /// An instant query: the samples of the vector (an empty vector is `Ok(vec![])`).
    pub fn query(&self, promql: &str) -> Result<Vec<Sample>, PrometheusError> {
        let path = "/api/v1/query";
        let body = self.request(path, &[("query", promql)])?;
        let bad = |reason: String| PrometheusError::BadAnswer {
            url: self.shown.clone(),
            path: path.to_string(),
            reason,
        };
        let answer: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| bad(e.to_string()))?;
        if answer["status"] != "success" {
            return Err(PrometheusError::QueryFailed {
                query: promql.to_string(),
                error: answer["error"]
                    .as_str()
                    .unwrap_or("no reason given")
                    .to_string(),
            });
        }
        let data = &answer["data"];
        match data["resultType"].as_str() {
            Some("vector") => {}
            Some(other) => return Err(bad(format!("resultType {other}, not vector"))),
            None => return Err(bad("no data.resultType".into())),
        }
        let results = data["result"]
            .as_array()
            .ok_or_else(|| bad("no data.result array".into()))?;
        results
            .iter()
            .map(|series| parse_sample(series).ok_or_else(|| bad(format!("sample {series}"))))
            .collect()
    }
}

/// One `{"metric": {...}, "value": [ts, "v"]}`.
fn parse_sample(series: &serde_json::Value) -> Option<Sample> {
    let labels = series["metric"]
        .as_object()?
        .iter()
        .map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect::<Option<BTreeMap<_, _>>>()?;
    let value = series["value"].as_array()?;
    let timestamp = value.first()?.as_f64()?;
    let value = match value.get(1)?.as_str()? {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        text => text.parse().ok()?,
    };
    Some(Sample {
        labels,
        timestamp,
        value,
    })
}

/// `url` without the `user:password@` part, for messages and logs (also when the scheme is
/// missing).
pub fn redact(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}***@{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_parse_with_their_labels_and_special_values() {
        let series: serde_json::Value = serde_json::from_str(
            r#"{"metric":{"__name__":"up","instance":"127.0.0.1:9121"},"value":[1700000000.5,"1"]}"#,
        )
        .unwrap();
        let sample = parse_sample(&series).unwrap();
        assert_eq!(sample.labels["instance"], "127.0.0.1:9121");
        assert_eq!((sample.timestamp, sample.value), (1_700_000_000.5, 1.0));
        let nan: serde_json::Value =
            serde_json::from_str(r#"{"metric":{},"value":[1,"NaN"]}"#).unwrap();
        assert!(parse_sample(&nan).unwrap().value.is_nan());
        let broken: serde_json::Value =
            serde_json::from_str(r#"{"metric":{},"value":[1]}"#).unwrap();
        assert_eq!(parse_sample(&broken), None);
    }

    #[test]
    fn urls_are_checked_and_never_shown_with_credentials() {
        assert!(matches!(
            PrometheusClient::new("127.0.0.1:9090"),
            Err(PrometheusError::BadUrl(_))
        ));
        assert!(matches!(
            PrometheusClient::new("ftp://x"),
            Err(PrometheusError::BadUrl(_))
        ));
        let client = PrometheusClient::new("http://ops:s3cret@127.0.0.1:9/prom/").unwrap();
        assert_eq!(client.url(), "http://***@127.0.0.1:9/prom");
        assert!(!format!("{client:?}").contains("s3cret"));
        let error = PrometheusClient::new("ops:s3cret@127.0.0.1").unwrap_err();
        assert!(!error.to_string().contains("s3cret"), "{error}");
    }

    #[test]
    fn an_unreachable_server_is_a_clear_error() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = PrometheusClient::new(&format!("http://127.0.0.1:{port}")).unwrap();
        let error = client.query("up").unwrap_err();
        assert!(
            matches!(error, PrometheusError::Unreachable { .. }),
            "{error}"
        );
        assert!(error.to_string().starts_with(&format!(
            "Prometheus at http://127.0.0.1:{port} is unreachable"
        )));
    }
}

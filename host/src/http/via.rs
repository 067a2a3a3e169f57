//! `--proxy-via host:port`: proxied requests go through a forward proxy, as WireMock
//! sends them. A plain `http://` target is asked of the proxy in absolute form; an
//! `https://` target through a `CONNECT` tunnel, with TLS to the target inside it.
//! `user:password@host:port` adds `Proxy-Authorization: Basic`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderValue, Uri};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Where `--proxy-via` points.
#[derive(Debug, Clone)]
pub struct ProxyVia {
    /// `http://host:port`, what the TCP connection is made to.
    uri: Uri,
    authority: String,
    /// `Basic ...` for `user:password@`.
    pub auth: Option<HeaderValue>,
}

impl ProxyVia {
    /// Reads WireMock's `host:port` (or `http://host:port`, with `user:password@`).
    pub fn parse(v: &str) -> Result<ProxyVia, String> {
        let rest = v.strip_prefix("http://").unwrap_or(v);
        if rest.contains("://") {
            return Err(format!(
                "{v:?}: only an HTTP proxy (host:port) is supported"
            ));
        }
        let rest = rest.trim_end_matches('/');
        let (auth, hostport) = match rest.rsplit_once('@') {
            Some((creds, hp)) => {
                use base64::Engine as _;
                let b64 = base64::engine::general_purpose::STANDARD.encode(creds);
                let value = HeaderValue::from_str(&format!("Basic {b64}"))
                    .map_err(|_| format!("{v:?}: the credentials are not valid in a header"))?;
                (Some(value), hp)
            }
            None => (None, rest),
        };
        let (host, port) = hostport
            .rsplit_once(':')
            .ok_or_else(|| format!("{v:?} is not host:port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| format!("{v:?}: {port:?} is not a port number"))?;
        if host.is_empty() {
            return Err(format!("{v:?} names no host"));
        }
        let authority = format!("{host}:{port}");
        let uri = format!("http://{authority}")
            .parse()
            .map_err(|e| format!("{v:?} is not host:port: {e}"))?;
        Ok(ProxyVia {
            uri,
            authority,
            auth,
        })
    }

    pub fn authority(&self) -> &str {
        &self.authority
    }
}

/// The TCP connector under TLS: straight to the target, or through [`ProxyVia`].
#[derive(Debug, Clone)]
pub struct ViaConnector {
    pub http: HttpConnector<super::targets::CheckedResolver>,
    pub via: Option<Arc<ProxyVia>>,
}

/// A connection that tells hyper whether it goes to a proxy (then a plain HTTP
/// request is written in absolute form).
#[derive(Debug)]
pub struct ViaIo {
    inner: TokioIo<TcpStream>,
    proxy: bool,
}

impl Connection for ViaIo {
    fn connected(&self) -> Connected {
        self.inner.connected().proxy(self.proxy)
    }
}

impl hyper::rt::Read for ViaIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for ViaIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl tower_service::Service<Uri> for ViaConnector {
    type Response = ViaIo;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<ViaIo, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let Some(via) = self.via.clone() else {
            let connecting = self.http.call(dst);
            return Box::pin(async move {
                Ok(ViaIo {
                    inner: connecting.await?,
                    proxy: false,
                })
            });
        };
        let connecting = self.http.call(via.uri.clone());
        Box::pin(async move {
            let io = connecting.await?;
            if dst.scheme_str() != Some("https") {
                return Ok(ViaIo {
                    inner: io,
                    proxy: true,
                });
            }
            let mut tcp = io.into_inner();
            let host = dst.host().ok_or("the target URL has no host")?;
            let target = format!("{host}:{}", dst.port_u16().unwrap_or(443));
            let mut req = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
            if let Some(a) = &via.auth {
                req.push_str("Proxy-Authorization: ");
                req.push_str(a.to_str().unwrap_or_default());
                req.push_str("\r\n");
            }
            req.push_str("\r\n");
            tcp.write_all(req.as_bytes()).await?;
            // The proxy's answer, read byte by byte so nothing of the tunnel is taken.
            let mut head = Vec::with_capacity(256);
            while !head.ends_with(b"\r\n\r\n") {
                if head.len() > 16 * 1024 {
                    return Err("the proxy's answer to CONNECT is too long".into());
                }
                head.push(tcp.read_u8().await?);
            }
            let status = String::from_utf8_lossy(&head);
            let status = status.lines().next().unwrap_or("");
            if status.split_whitespace().nth(1) != Some("200") {
                return Err(format!(
                    "the proxy {} refused to open a tunnel to {target}: {status}",
                    via.authority
                )
                .into());
            }
            Ok(ViaIo {
                inner: TokioIo::new(tcp),
                proxy: false,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_addresses_are_read_as_wiremock_takes_them() {
        let v = ProxyVia::parse("proxy.local:3128").unwrap();
        assert_eq!(v.authority(), "proxy.local:3128");
        assert!(v.auth.is_none());
        let v = ProxyVia::parse("http://user:pw@proxy.local:3128").unwrap();
        assert_eq!(v.auth.unwrap(), "Basic dXNlcjpwdw==");
        for bad in ["proxy.local", "proxy.local:http", ":80", "socks5://p:1"] {
            assert!(ProxyVia::parse(bad).is_err(), "{bad}");
        }
    }
}

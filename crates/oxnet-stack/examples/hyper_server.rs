//! hyper's HTTP/1.1 server on oxnet's TCP stack (issue 11, item 5
//! "Ecosystem"): hyper's own connection code, unchanged, reads and writes
//! an oxnet `TcpStream` through the poll calls that also give the
//! `futures-io` and tokio traits (`oxnet_stack::tcp::io_traits`).
//!
//! Self-contained, no device and no privileges: one router with the
//! stack at 10.0.0.1 whose output loops back to its input (through a
//! Queue, so a push never re-enters TCPStack), in simulated time; hyper
//! serves port 80 on the router's executor, and a plain oxnet client
//! task on the same stack sends a request and prints the answer.
//!
//!   cargo run -p oxnet-stack --example hyper_server --features hyper-example
//!
//! hyper 1 reads and writes through its own `hyper::rt::Read`/`Write`
//! (what hyper-util's `TokioIo` adapts tokio's traits to); `HyperIo`
//! below is that adapter for an oxnet stream, on the same poll calls.

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use oxnet_graph::elements::Standard;
use oxnet_graph::{Registry, Router};
use oxnet_stack::tcp::info::TcpInfo;
use oxnet_stack::tcp::socket::{TcpListener, TcpStream};
use oxnet_stack::wire::IpEndpoint;
use std::cell::RefCell;
use std::convert::Infallible;
use std::net::Ipv4Addr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

/// An oxnet stream as hyper's I/O.
struct HyperIo(TcpStream);

impl hyper::rt::Read for HyperIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        // Through a buffer on the stack: filling hyper's uninitialised
        // cursor in place takes unsafe code this example does without.
        let mut space = [0u8; 16 * 1024];
        let want = buf.remaining().min(space.len());
        match self.get_mut().0.poll_read_bytes(cx, &mut space[..want]) {
            Poll::Ready(Ok(n)) => {
                buf.put_slice(&space[..n]);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(std::io::Error::from_raw_os_error(e))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl hyper::rt::Write for HyperIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.get_mut()
            .0
            .poll_write_bytes(cx, buf)
            .map_err(std::io::Error::from_raw_os_error)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(self.0.shutdown_write().map_err(std::io::Error::from_raw_os_error))
    }
}

async fn hello(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = format!("hello from hyper on oxnet: {} {}\n", req.method(), req.uri());
    Ok(Response::new(Full::new(Bytes::from(body))))
}

const CONFIG: &str = "tcp :: TCPStack; AppExecutor;
tcp -> Queue(1024) -> Unqueue -> MarkIPHeader -> tcp;";

fn main() {
    oxnet_stack::elements::register();
    let flat = oxnet_graph::lang::compile("hyper.click", CONFIG, &[], &|c: &str| Standard.create(c).is_some())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut router = Router::build(&flat, &Standard).unwrap_or_else(|e| panic!("{e}"));
    router.use_simulated_time();
    // Right after the build: this router's stack and executor.
    let stack = oxnet_stack::elements::shared::<TcpInfo>();
    let exec = oxnet_stack::app::executor();

    let addr = Ipv4Addr::new(10, 0, 0, 1);
    let listener = TcpListener::bind(&stack, IpEndpoint::new(addr, 80), 64).expect("listen on port 80");
    exec.borrow().spawn(async move {
        while let Ok(stream) = listener.accept().await {
            oxnet_stack::exec::spawn(async move {
                let served = http1::Builder::new()
                    .serve_connection(HyperIo(stream), service_fn(hello))
                    .await;
                if let Err(e) = served {
                    eprintln!("connection: {e}");
                }
            });
        }
    });

    let answer = Rc::new(RefCell::new(None));
    let out = answer.clone();
    let client =
        TcpStream::connect(&stack, IpEndpoint::new(addr, 0), IpEndpoint::new(addr, 80)).expect("a client socket");
    exec.borrow().spawn(async move {
        client.connected().await.expect("connected");
        let request = b"GET /index.html HTTP/1.1\r\nHost: 10.0.0.1\r\nConnection: close\r\n\r\n";
        client.write_all(request).await.expect("request sent");
        let mut response = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match client.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => response.extend_from_slice(&buf[..n]),
                Err(e) => panic!("read: {}", std::io::Error::from_raw_os_error(e)),
            }
        }
        *out.borrow_mut() = Some(String::from_utf8_lossy(&response).into_owned());
    });

    let done = answer.clone();
    router.run(&|| done.borrow().is_some());
    let answer = answer.borrow_mut().take().expect("an answer");
    print!("{answer}");
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "not a 200: {answer}");
    assert!(answer.ends_with("hello from hyper on oxnet: GET /index.html\n"));
}

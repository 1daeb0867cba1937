//! Copying bytes both ways between the sandbox's connection and the upstream one, ending when
//! both sides are done, either side fails, or nothing moved in either direction for `idle`.
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Buffer per direction.
const CHUNK: usize = 16 * 1024;

struct Activity {
    base: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn touch(&self) {
        let ms = u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let now = self.base.elapsed();
        now.saturating_sub(Duration::from_millis(self.last_ms.load(Ordering::Relaxed)))
    }
}

async fn one_way<R, W>(mut r: R, mut w: W, idle: Duration, act: &Activity) -> Result<u64, ()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; CHUNK];
    let mut total: u64 = 0;
    loop {
        let n = match tokio::time::timeout(idle, r.read(&mut buf)).await {
            Ok(Ok(0)) => {
                let _ = w.shutdown().await;
                return Ok(total);
            }
            Ok(Ok(n)) => n,
            Ok(Err(_)) => return Err(()),
            // Quiet this way; fine as long as the other direction moves.
            Err(_) if act.idle_for() < idle => continue,
            Err(_) => return Err(()),
        };
        act.touch();
        match tokio::time::timeout(idle, w.write_all(&buf[..n])).await {
            Ok(Ok(())) => {}
            _ => return Err(()),
        }
        act.touch();
        total = total.saturating_add(n as u64);
    }
}

/// Pump until done; returns the bytes moved (client to upstream, upstream to client), or
/// `None` when the pump ended on an error or an idle timeout.
pub async fn pump<A, B>(a: A, b: B, idle: Duration) -> Option<(u64, u64)>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let act = Activity {
        base: Instant::now(),
        last_ms: AtomicU64::new(0),
    };
    let (ar, aw) = tokio::io::split(a);
    let (br, bw) = tokio::io::split(b);
    tokio::try_join!(one_way(ar, bw, idle, &act), one_way(br, aw, idle, &act)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn copies_both_ways_and_stops_when_idle() {
        let (client, mut client_far) = tokio::io::duplex(1024);
        let (upstream, mut upstream_far) = tokio::io::duplex(1024);
        let task = tokio::spawn(pump(client, upstream, Duration::from_millis(200)));
        client_far.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        upstream_far.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        upstream_far.write_all(b"pong").await.unwrap();
        client_far.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"pong");
        // Nobody talks: the pump gives up by itself.
        let out = tokio::time::timeout(Duration::from_secs(3), task)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(out, None);
    }

    #[tokio::test]
    async fn ends_cleanly_when_both_sides_close() {
        let (client, mut client_far) = tokio::io::duplex(1024);
        let (upstream, mut upstream_far) = tokio::io::duplex(1024);
        let task = tokio::spawn(pump(client, upstream, Duration::from_secs(5)));
        client_far.write_all(b"abc").await.unwrap();
        client_far.shutdown().await.unwrap();
        let mut all = Vec::new();
        upstream_far.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"abc");
        upstream_far.write_all(b"xy").await.unwrap();
        upstream_far.shutdown().await.unwrap();
        let mut back = Vec::new();
        client_far.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, b"xy");
        assert_eq!(task.await.unwrap(), Some((3, 2)));
    }
}

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;

const LONG: Duration = Duration::from_secs(10);

/// Queue a run of `sandbox` in the background; it records its name in `order` once granted and
/// holds its slot until `hold` is notified.
fn queue_run(
    slots: &Slots,
    sandbox: &'static str,
    label: &'static str,
    order: &Arc<Mutex<Vec<&'static str>>>,
) -> (tokio::task::JoinHandle<()>, oneshot::Sender<()>) {
    let (done_tx, done_rx) = oneshot::channel::<()>();
    let slots = slots.clone();
    let order = Arc::clone(order);
    let task = tokio::spawn(async move {
        let permit = slots.acquire(sandbox, LONG).await.expect("a slot");
        order.lock().unwrap().push(label);
        let _ = done_rx.await;
        drop(permit);
    });
    (task, done_tx)
}

async fn settle(slots: &Slots, queued: usize) {
    for _ in 0..1000 {
        if slots.queued() == queued {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("queue never reached {queued} (is {})", slots.queued());
}

#[tokio::test]
async fn a_free_slot_is_taken_at_once_and_given_back_on_drop() {
    let slots = Slots::new(2, 4);
    let a = slots.acquire("a", Duration::ZERO).await.unwrap();
    let b = slots.acquire("b", Duration::ZERO).await.unwrap();
    assert_eq!(slots.busy(), 2);
    drop(a);
    assert_eq!(slots.busy(), 1);
    drop(b);
    assert_eq!(slots.busy(), 0);
}

#[tokio::test]
async fn sandboxes_take_turns_and_one_sandboxs_runs_go_in_arrival_order() {
    let slots = Slots::new(1, 16);
    let order = Arc::new(Mutex::new(Vec::new()));
    let first = slots.acquire("x", LONG).await.unwrap();
    let mut runs = Vec::new();
    for (sb, label) in [
        ("a", "a1"),
        ("a", "a2"),
        ("a", "a3"),
        ("b", "b1"),
        ("c", "c1"),
    ] {
        let (task, done) = queue_run(&slots, sb, label, &order);
        // Each run gives its slot back as soon as it has it.
        done.send(()).unwrap();
        runs.push(task);
        settle(&slots, runs.len()).await;
    }
    drop(first);
    for task in runs {
        task.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), ["a1", "b1", "c1", "a2", "a3"]);
    assert_eq!((slots.busy(), slots.queued()), (0, 0));
}

#[tokio::test]
async fn a_full_queue_refuses_and_says_its_bound() {
    let slots = Slots::new(1, 1);
    let order = Arc::new(Mutex::new(Vec::new()));
    let held = slots.acquire("a", LONG).await.unwrap();
    let (task, done) = queue_run(&slots, "b", "b", &order);
    settle(&slots, 1).await;
    let refused = slots.acquire("c", LONG).await.unwrap_err();
    assert_eq!(
        refused,
        QueueRefusal::Full {
            slots: 1,
            queued: 1
        }
    );
    drop(held);
    done.send(()).unwrap();
    task.await.unwrap();
    assert_eq!(*order.lock().unwrap(), ["b"]);
    assert_eq!((slots.busy(), slots.queued()), (0, 0));
}

#[tokio::test]
async fn a_deadline_that_passes_in_the_queue_is_refused_and_leaves_nothing_behind() {
    let slots = Slots::new(1, 4);
    let held = slots.acquire("a", LONG).await.unwrap();
    let refused = slots
        .acquire("b", Duration::from_millis(30))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, QueueRefusal::Deadline { slots: 1, waited_ms } if waited_ms >= 30),
        "{refused:?}"
    );
    assert_eq!(slots.queued(), 0);
    drop(held);
    assert_eq!(
        slots.busy(),
        0,
        "the slot went back, not to the gone waiter"
    );
    let again = slots.acquire("b", Duration::ZERO).await;
    assert!(again.is_ok());
}

#[tokio::test]
async fn a_cancelled_waiter_leaves_the_queue_and_the_next_one_is_served() {
    let slots = Slots::new(1, 4);
    let order = Arc::new(Mutex::new(Vec::new()));
    let held = slots.acquire("a", LONG).await.unwrap();
    let gone = {
        let slots = slots.clone();
        tokio::spawn(async move { slots.acquire("b", LONG).await.map(drop) })
    };
    settle(&slots, 1).await;
    let (task, done) = queue_run(&slots, "c", "c", &order);
    settle(&slots, 2).await;
    gone.abort();
    settle(&slots, 1).await;
    drop(held);
    done.send(()).unwrap();
    task.await.unwrap();
    assert_eq!(*order.lock().unwrap(), ["c"]);
    assert_eq!((slots.busy(), slots.queued()), (0, 0));
}

//! The sender's bookkeeping under any order of sends, acknowledgements and
//! losses, and what a loss costs while many messages wait.

use bytes::Bytes;
use proptest::prelude::*;

use super::MessageSender;

/// Where a message stands, as the application and the network see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Model {
    /// To be sent (new, or its last copy was lost).
    Queued,
    /// Sent; not known lost.
    Sent,
    Acked,
}

/// Work done to lose and resend each of `losses` messages from the front
/// of a queue `depth` long.
fn work_per_loss(depth: usize, losses: u64) -> u64 {
    let mut tx = MessageSender::new();
    for _ in 0..depth {
        tx.push(Bytes::from_static(&[7; 64]));
    }
    let before = tx.visited;
    for _ in 0..losses {
        let id = tx.poll(|_, _| true).map(|(id, _)| id).expect("queued");
        tx.on_lost(id);
        let again = tx.poll(|_, _| true).map(|(id, _)| id);
        assert_eq!(again, Some(id), "the lost one goes first");
        tx.on_acked(id);
    }
    (tx.visited - before) / losses
}

#[test]
fn a_loss_costs_the_same_however_many_messages_wait_behind_it() {
    let shallow = work_per_loss(1_000, 1_000);
    let deep = work_per_loss(200_000, 1000);
    assert!(shallow <= 3, "{shallow} slots visited per loss");
    assert_eq!(deep, shallow, "200 000 messages queued: {deep} per loss");
}

#[test]
fn abandoned_messages_are_gone_and_numbering_goes_on() {
    let mut tx = MessageSender::new();
    let sent = tx.push(Bytes::from_static(b"sent"));
    tx.push(Bytes::from_static(b"queued"));
    assert_eq!(tx.poll(|_, _| true).map(|(id, _)| id), Some(sent));
    tx.abandon();
    assert_eq!((tx.held(), tx.held_bytes()), (0, 0));
    assert!(!tx.wants_to_send());
    assert_eq!(tx.poll(|_, _| true), None);
    // A late acknowledgement or loss of what was abandoned changes nothing.
    assert_eq!(tx.on_acked(sent), 0);
    tx.on_lost(sent);
    assert!(!tx.wants_to_send());
    assert_eq!(tx.push(Bytes::from_static(b"next")), sent + 2);
}

#[test]
fn a_message_lost_twice_before_its_resend_is_queued_once() {
    let mut tx = MessageSender::new();
    let id = tx.push(Bytes::from_static(b"once"));
    assert_eq!(tx.poll(|_, _| true).map(|(id, _)| id), Some(id));
    tx.on_lost(id);
    tx.on_lost(id);
    assert_eq!(tx.poll(|_, _| true).map(|(id, _)| id), Some(id));
    assert!(!tx.wants_to_send(), "one resend for two losses");
    // Acknowledged while queued again: skipped, not sent.
    tx.on_lost(id);
    assert_eq!(tx.on_acked(id), 4);
    assert_eq!(tx.poll(|_, _| true), None);
    assert_eq!((tx.held(), tx.held_bytes()), (0, 0));
}

proptest! {
    /// Messages pushed, sent, acknowledged (late, twice) and lost in any
    /// order: each is acknowledged exactly once, with its size; none is
    /// lost from the application's view (every one not acknowledged is
    /// queued or in flight, and draining acknowledges all); a message is
    /// polled only when the model says it is to be sent; and the counts
    /// match.
    #[test]
    fn each_message_is_acknowledged_once_and_none_is_lost(
        script in proptest::collection::vec((0u8..5, any::<usize>()), 0..800),
    ) {
        let mut tx = MessageSender::new();
        let mut model: Vec<Model> = Vec::new();
        // Packets in flight, each carrying one message.
        let mut flight: Vec<u64> = Vec::new();
        let mut freed = vec![0usize; 0];
        let size = |id: u64| (id % 41) as usize;
        for (op, pick) in script {
            match op {
                0 => {
                    let id = tx.push(Bytes::from(vec![1; size(model.len() as u64)]));
                    prop_assert_eq!(id, model.len() as u64);
                    model.push(Model::Queued);
                    freed.push(0);
                }
                1 => {
                    if let Some((id, m)) = tx.poll(|_, _| true) {
                        prop_assert_eq!(m.len(), size(id));
                        prop_assert_eq!(model[id as usize], Model::Queued);
                        model[id as usize] = Model::Sent;
                        flight.push(id);
                    } else {
                        prop_assert!(!model.contains(&Model::Queued));
                    }
                }
                2 | 3 if !flight.is_empty() => {
                    let id = flight.swap_remove(pick % flight.len());
                    if op == 2 {
                        freed[id as usize] += tx.on_acked(id);
                        model[id as usize] = Model::Acked;
                    } else {
                        tx.on_lost(id);
                        if model[id as usize] == Model::Sent {
                            model[id as usize] = Model::Queued;
                        }
                    }
                }
                4 if !model.is_empty() => {
                    // A duplicate or late acknowledgement of any message sent.
                    let id = (pick % model.len()) as u64;
                    if model[id as usize] == Model::Acked {
                        prop_assert_eq!(tx.on_acked(id), 0);
                    }
                }
                _ => {}
            }
            let held = model.iter().filter(|m| **m != Model::Acked).count();
            let bytes: usize = (0..model.len() as u64)
                .filter(|id| model[*id as usize] != Model::Acked)
                .map(size)
                .sum();
            prop_assert_eq!((tx.held(), tx.held_bytes()), (held, bytes));
        }
        // Drain: what is queued goes out, and everything is acknowledged.
        while let Some((id, _)) = tx.poll(|_, _| true) {
            flight.push(id);
        }
        for id in flight {
            freed[id as usize] += tx.on_acked(id);
            model[id as usize] = Model::Acked;
        }
        prop_assert!(model.iter().all(|m| *m == Model::Acked), "{:?}", model);
        for (id, f) in freed.iter().enumerate() {
            prop_assert_eq!(*f, size(id as u64), "message {}", id);
        }
        prop_assert_eq!((tx.held(), tx.held_bytes()), (0, 0));
    }
}

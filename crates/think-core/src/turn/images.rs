//! The bound on the images a turn carries: every model request of a turn resends all the
//! images its tool results handed over, and they are held in the isolate's 128 MB until the
//! turn ends, so a long browsing turn would otherwise grow without limit (30 calls of 4
//! screenshots of 5 MB are 600 MB) and pass the providers' request caps (Anthropic: 100
//! images, 32 MB per request).

use crate::model::ModelMessage;

/// Most images a turn's messages carry at once. Twenty keep the last five calls' worth of
/// screenshots at the per-call cap (`MAX_IMAGES_PER_CALL` = 4) in view, a fifth of
/// Anthropic's 100 per request.
pub const MAX_TURN_IMAGES: usize = 20;

/// Most base64 characters of images a turn's messages carry at once: 20 MB leaves room
/// under Anthropic's 32 MB request for the text, and under the isolate's 128 MB for the
/// request body built from it (about twice the images again while it is encoded and sent).
pub const MAX_TURN_IMAGE_CHARS: usize = 20 * 1024 * 1024;

/// Drops the oldest images of `messages`' tool results until what remains is within
/// [`MAX_TURN_IMAGES`] and [`MAX_TURN_IMAGE_CHARS`], so the newest reach the model; each
/// result keeps its text, where the browser tools describe every screenshot. Frees what it
/// drops. Returns how many images it dropped.
pub fn bound_turn_images(messages: &mut [ModelMessage]) -> usize {
    let (mut count, mut chars, mut full, mut dropped) = (0usize, 0usize, false, 0usize);
    for message in messages.iter_mut().rev() {
        let ModelMessage::Tool { images, .. } = message else { continue };
        // Within one result the later images are the newer ones: keep a suffix.
        let mut keep = 0;
        for image in images.iter().rev() {
            full =
                full || count == MAX_TURN_IMAGES || chars + image.data.len() > MAX_TURN_IMAGE_CHARS;
            if full {
                break;
            }
            count += 1;
            chars += image.data.len();
            keep += 1;
        }
        let drop = images.len() - keep;
        if drop > 0 {
            dropped += drop;
            images.drain(..drop);
            images.shrink_to_fit();
        }
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ImagePart;

    fn result(id: usize, sizes: &[usize]) -> ModelMessage {
        ModelMessage::Tool {
            tool_call_id: format!("c{id}"),
            tool_name: "browser_execute".into(),
            content: format!("call {id}: {} screenshots described", sizes.len()),
            images: sizes
                .iter()
                .enumerate()
                .map(|(k, &n)| ImagePart {
                    media_type: "image/png".into(),
                    data: format!("{id}.{k}.").chars().cycle().take(n).collect(),
                })
                .collect(),
        }
    }

    /// `(call, images' first bytes, content)` of every tool result.
    fn images_of(messages: &[ModelMessage]) -> Vec<(String, Vec<String>, String)> {
        messages
            .iter()
            .filter_map(|m| match m {
                ModelMessage::Tool { tool_call_id, images, content, .. } => Some((
                    tool_call_id.clone(),
                    images
                        .iter()
                        .map(|i| i.data.split('.').take(2).collect::<Vec<_>>().join("."))
                        .collect(),
                    content.clone(),
                )),
                _ => None,
            })
            .collect()
    }

    fn carried(messages: &[ModelMessage]) -> (usize, usize, usize) {
        messages.iter().fold((0, 0, 0), |(n, chars, cap), m| match m {
            ModelMessage::Tool { images, .. } => (
                n + images.len(),
                chars + images.iter().map(|i| i.data.len()).sum::<usize>(),
                cap + images.capacity(),
            ),
            _ => (n, chars, cap),
        })
    }

    #[test]
    fn a_long_turn_keeps_the_newest_images_within_the_count() {
        let mut messages = vec![ModelMessage::User { content: "browse".into() }];
        let mut most = 0;
        for call in 0..30 {
            messages.push(result(call, &[1_000; 4]));
            bound_turn_images(&mut messages);
            let (n, _, cap) = carried(&messages);
            assert!(
                n <= MAX_TURN_IMAGES && cap <= MAX_TURN_IMAGES,
                "after call {call}: {n} ({cap})"
            );
            most = most.max(n);
        }
        assert_eq!(most, MAX_TURN_IMAGES);
        let kept = images_of(&messages);
        assert_eq!(kept.len(), 30);
        // The last five calls keep their four each; every older one lost them all.
        for (call, (id, images, content)) in kept.iter().enumerate() {
            assert_eq!(id, &format!("c{call}"));
            assert_eq!(content, &format!("call {call}: 4 screenshots described"));
            let want: Vec<String> =
                if call >= 25 { (0..4).map(|k| format!("{call}.{k}")).collect() } else { vec![] };
            assert_eq!(images, &want, "call {call}");
        }
    }

    #[test]
    fn the_bytes_bound_drops_the_oldest_first_even_within_a_call() {
        let mb = 1024 * 1024;
        let mut messages = vec![result(0, &[5 * mb, 5 * mb]), result(1, &[4 * mb, 3 * mb, 5 * mb])];
        // 22 MB: call 0's first screenshot, the oldest, goes.
        assert_eq!(bound_turn_images(&mut messages), 1);
        assert_eq!(images_of(&messages)[0].1, ["0.1"]);
        assert_eq!(carried(&messages).1, 17 * mb);
        messages.push(result(2, &[5 * mb]));
        // 5 + 5 + 3 + 4 = 17 MB fit; the next older (call 0's second, 5 MB) would pass 20.
        assert_eq!(bound_turn_images(&mut messages), 1);
        let kept = images_of(&messages);
        assert_eq!(kept[0].1, Vec::<String>::new());
        assert_eq!(kept[1].1, ["1.0", "1.1", "1.2"]);
        assert_eq!(kept[2].1, ["2.0"]);
        let (n, chars, _) = carried(&messages);
        assert_eq!((n, chars), (4, 17 * mb));
        assert!(chars <= MAX_TURN_IMAGE_CHARS);
        // An image older than one that did not fit is dropped too, however small.
        messages.insert(0, result(9, &[10]));
        messages.push(result(3, &[MAX_TURN_IMAGE_CHARS - 1]));
        bound_turn_images(&mut messages);
        let kept = images_of(&messages);
        assert!(kept[..4].iter().all(|k| k.1.is_empty()), "{:?}", kept);
        assert_eq!(kept[4].1, ["3.0"]);
    }
}

//! The cluster's shape as its nodes report it: `CLUSTER NODES` parsed into masters, slot owners
//! and open (migrating or importing) slots.

use crate::resp::ReplyShape;
use crate::slot::SLOT_COUNT;

/// One line of `CLUSTER NODES`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLine {
    /// The 40-character node id.
    pub id: String,
    /// `ip:port` the node serves clients on (the `@cport` and `,hostname` parts removed).
    pub address: String,
    /// Flags such as `myself`, `master`, `slave`, `fail?`, `fail`, `handshake`, `noaddr`.
    pub flags: Vec<String>,
    /// The id of the master of a replica, `None` for a master.
    pub master_id: Option<String>,
    /// The node's configuration epoch.
    pub config_epoch: u64,
    /// `connected` or `disconnected`: the state of the cluster bus link to the node.
    pub link_connected: bool,
    /// Slots served by the node, as inclusive ranges.
    pub slot_ranges: Vec<(u16, u16)>,
    /// `(slot, target id)`: slots this node is migrating (only on the `myself` line).
    pub migrating: Vec<(u16, String)>,
    /// `(slot, source id)`: slots this node is importing (only on the `myself` line).
    pub importing: Vec<(u16, String)>,
}

impl NodeLine {
    /// True when the node carries `flag`.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// True for a master (a primary) node.
    pub fn is_master(&self) -> bool {
        self.has_flag("master")
    }

    /// The reason the node cannot be used, if any: failing, in handshake, without address.
    pub fn trouble(&self) -> Option<&'static str> {
        if self.has_flag("fail") {
            Some("marked failed (fail)")
        } else if self.has_flag("fail?") {
            Some("suspected failing (fail?)")
        } else if self.has_flag("handshake") {
            Some("still in handshake")
        } else if self.has_flag("noaddr") {
            Some("has no known address (noaddr)")
        } else {
            None
        }
    }
}

/// A `CLUSTER NODES` reply that cannot be read: the line and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("CLUSTER NODES line {line:?}: {problem}")]
pub struct NodesParseError {
    /// The offending line.
    pub line: String,
    /// What is wrong with it.
    pub problem: String,
}

/// Parses a whole `CLUSTER NODES` reply.
pub fn parse_cluster_nodes(reply: &str) -> Result<Vec<NodeLine>, NodesParseError> {
    reply
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(parse_node_line)
        .collect()
}

fn parse_node_line(line: &str) -> Result<NodeLine, NodesParseError> {
    let fail = |problem: String| NodesParseError {
        line: line.to_string(),
        problem,
    };
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 8 {
        return Err(fail(format!(
            "has {} fields, at least 8 expected",
            fields.len()
        )));
    }
    let address = fields[1]
        .split(['@', ','])
        .next()
        .unwrap_or_default()
        .to_string();
    let config_epoch = fields[6]
        .parse()
        .map_err(|_| fail(format!("config epoch {:?} is not a number", fields[6])))?;
    let mut node = NodeLine {
        id: fields[0].to_string(),
        address,
        flags: fields[2].split(',').map(str::to_string).collect(),
        master_id: (fields[3] != "-").then(|| fields[3].to_string()),
        config_epoch,
        link_connected: fields[7] == "connected",
        slot_ranges: Vec::new(),
        migrating: Vec::new(),
        importing: Vec::new(),
    };
    for field in &fields[8..] {
        parse_slot_field(field, &mut node).map_err(|shape| fail(shape.to_string()))?;
    }
    Ok(node)
}

fn parse_slot_field(field: &str, node: &mut NodeLine) -> Result<(), ReplyShape> {
    let slot = |text: &str| -> Result<u16, ReplyShape> {
        text.parse::<u16>()
            .ok()
            .filter(|&s| usize::from(s) < SLOT_COUNT)
            .ok_or_else(|| ReplyShape::SlotOutOfRange {
                value: format!("{text:?}"),
            })
    };
    if let Some(open) = field.strip_prefix('[').and_then(|f| f.strip_suffix(']')) {
        if let Some((number, target)) = open.split_once("->-") {
            node.migrating.push((slot(number)?, target.to_string()));
        } else if let Some((number, source)) = open.split_once("-<-") {
            node.importing.push((slot(number)?, source.to_string()));
        } else {
            return Err(ReplyShape::OpenSlot {
                field: field.to_string(),
            });
        }
        return Ok(());
    }
    let (first, last) = match field.split_once('-') {
        Some((first, last)) => (slot(first)?, slot(last)?),
        None => (slot(field)?, slot(field)?),
    };
    if first > last {
        return Err(ReplyShape::ReversedRange {
            field: field.to_string(),
        });
    }
    node.slot_ranges.push((first, last));
    Ok(())
}

/// The owner of every slot in the view of one node (`None`: unassigned), as master ids.
pub fn slot_owners(lines: &[NodeLine]) -> Vec<Option<String>> {
    let mut owners = vec![None; SLOT_COUNT];
    for node in lines {
        for &(first, last) in &node.slot_ranges {
            for slot in first..=last {
                owners[usize::from(slot)] = Some(node.id.clone());
            }
        }
    }
    owners
}

/// Slots as compact inclusive ranges, for printing: `0-4095,8000`.
pub fn format_slot_ranges(slots: &[u16]) -> String {
    let mut sorted = slots.to_vec();
    sorted.sort_unstable();
    let mut parts: Vec<String> = Vec::new();
    let mut index = 0;
    while index < sorted.len() {
        let first = sorted[index];
        let mut last = first;
        while index + 1 < sorted.len() && sorted[index + 1] == last + 1 {
            index += 1;
            last = sorted[index];
        }
        parts.push(if first == last {
            first.to_string()
        } else {
            format!("{first}-{last}")
        });
        index += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    // A reply of redis-server 7.0 during a migration of slot 100 from a to b, seen from a.
    const REPLY: &str = "\
aaaa 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-4095 [100->-bbbb]
bbbb 127.0.0.1:7001@17001,host-b master - 0 1700000000000 2 connected 4096-8191
cccc 127.0.0.1:7002@17002 master,fail? - 1700000000000 0 3 disconnected 8192-12287 12300
dddd 127.0.0.1:7003@17003 slave cccc 0 1700000000000 3 connected
";

    #[test]
    fn parses_addresses_flags_slots_and_open_slots() {
        let nodes = parse_cluster_nodes(REPLY).unwrap();
        assert_eq!(nodes.len(), 4);
        assert_eq!(nodes[0].address, "127.0.0.1:7000");
        assert_eq!(nodes[1].address, "127.0.0.1:7001");
        assert!(nodes[0].has_flag("myself") && nodes[0].is_master());
        assert_eq!(nodes[0].slot_ranges, vec![(0, 4095)]);
        assert_eq!(nodes[0].migrating, vec![(100, "bbbb".to_string())]);
        assert_eq!(nodes[2].slot_ranges, vec![(8192, 12287), (12300, 12300)]);
        assert_eq!(nodes[2].trouble(), Some("suspected failing (fail?)"));
        assert!(!nodes[2].link_connected);
        assert_eq!(nodes[3].master_id.as_deref(), Some("cccc"));
        let owners = slot_owners(&nodes);
        assert_eq!(owners[100].as_deref(), Some("aaaa"));
        assert_eq!(owners[12299], None);
        assert_eq!(owners[12300].as_deref(), Some("cccc"));
    }

    #[test]
    fn parses_importing_and_rejects_garbage() {
        let nodes = parse_cluster_nodes(
            "bbbb 127.0.0.1:7001@17001 myself,master - 0 0 2 connected [100-<-aaaa]",
        )
        .unwrap();
        assert_eq!(nodes[0].importing, vec![(100, "aaaa".to_string())]);
        assert!(parse_cluster_nodes("too short").is_err());
        let error = parse_cluster_nodes("a 1:1@2 master - 0 0 1 connected 16384").unwrap_err();
        assert!(error.problem.contains("16384"), "{error}");
        assert!(parse_cluster_nodes("a 1:1@2 master - 0 0 x connected").is_err());
    }

    #[test]
    fn formats_ranges() {
        assert_eq!(format_slot_ranges(&[5, 1, 2, 3, 9]), "1-3,5,9");
        assert_eq!(format_slot_ranges(&[]), "");
    }
}

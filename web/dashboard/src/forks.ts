// Forks as a tree. The API's Box has no parent field; what it has is `boot`, how the box last
// started, which for a fork is "restored from a fork of PARENT" (docs/api.md). So a child is
// known as one only until it is started again (stop/start, rollback): then `boot` says that
// instead. Parents are named, not identified, in `boot`; names are unique among live boxes.

import type { Box } from "./api";

export function forkParentName(box: Box): string | undefined {
  const m = /\ba fork of ([A-Za-z0-9][A-Za-z0-9_.-]*)/.exec(box.boot ?? "");
  return m ? m[1] : undefined;
}

export interface TreeNode {
  box: Box;
  children: TreeNode[];
  depth: number;
}

// Every box once, children under their parents (by name), oldest first at each level.
export function forkForest(boxes: Box[]): TreeNode[] {
  const byName = new Map(boxes.map((b) => [b.name, b]));
  const children = new Map<string, Box[]>();
  const roots: Box[] = [];
  for (const b of boxes) {
    const parent = forkParentName(b);
    if (parent && byName.has(parent) && parent !== b.name) {
      const list = children.get(parent) ?? [];
      list.push(b);
      children.set(parent, list);
    } else {
      roots.push(b);
    }
  }
  const order = (a: Box, b: Box) => a.created_at - b.created_at || a.name.localeCompare(b.name);
  const seen = new Set<string>();
  const build = (b: Box, depth: number): TreeNode => {
    seen.add(b.id);
    const kids = (children.get(b.name) ?? []).filter((k) => !seen.has(k.id)).sort(order);
    return { box: b, depth, children: kids.map((k) => build(k, depth + 1)) };
  };
  const forest = roots.sort(order).map((b) => build(b, 0));
  // A cycle of names (a parent removed and its name reused) would leave boxes unseen.
  for (const b of boxes) if (!seen.has(b.id)) forest.push(build(b, 0));
  return forest;
}

export function flatten(forest: TreeNode[]): TreeNode[] {
  const out: TreeNode[] = [];
  const walk = (n: TreeNode) => {
    out.push(n);
    n.children.forEach(walk);
  };
  forest.forEach(walk);
  return out;
}

// The tree that holds `id` (its root and everything below it).
export function treeOf(forest: TreeNode[], id: string): TreeNode | undefined {
  const holds = (n: TreeNode): boolean => n.box.id === id || n.children.some(holds);
  return forest.find(holds);
}

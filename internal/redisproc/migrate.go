package redisproc

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A slot migration, step by step as redis-cli --cluster reshard does it:
// BeginMigration opens it (IMPORTING on the target, then MIGRATING on the
// source), MigrateKeys moves keys with MIGRATE, FinishMigration hands the
// slot over (SETSLOT NODE on the target, the source, then the others).
// In between, the source answers ASK for a key it no longer has, and the
// target serves a command flagged ASKING.

// BeginMigration opens slot's move from the primary from to the primary
// to.
func (c *RedisCluster) BeginMigration(ctx context.Context, slot int, from, to *Node) error {
	fromID, err := from.ID(ctx)
	if err != nil {
		return err
	}
	toID, err := to.ID(ctx)
	if err != nil {
		return err
	}
	s := strconv.Itoa(slot)
	if _, err := to.cmd1(ctx, "CLUSTER", "SETSLOT", s, "IMPORTING", fromID); err != nil {
		return err
	}
	_, err = from.cmd1(ctx, "CLUSTER", "SETSLOT", s, "MIGRATING", toID)
	return err
}

// MigrateKeys moves keys, which must be in slot, from the primary from to
// the primary to (MIGRATE ... KEYS); with no keys, every key the slot
// holds on from, in batches. It returns how many keys it moved.
func (c *RedisCluster) MigrateKeys(ctx context.Context, slot int, from, to *Node, keys ...string) (int, error) {
	move := func(batch []string) error {
		args := append([]string{"MIGRATE", to.opts.Host, strconv.Itoa(to.Port), "", "0", "5000", "KEYS"}, batch...)
		_, err := from.cmd1(ctx, args...)
		return err
	}
	if len(keys) > 0 {
		return len(keys), move(keys)
	}
	moved := 0
	for {
		batch, err := from.strings(ctx, "CLUSTER", "GETKEYSINSLOT", strconv.Itoa(slot), "100")
		if err != nil {
			return moved, err
		}
		if len(batch) == 0 {
			return moved, nil
		}
		if err := move(batch); err != nil {
			return moved, err
		}
		moved += len(batch)
	}
}

// FinishMigration gives slot to the primary to: SETSLOT NODE on to, then
// on from, then on every other running node, and waits until every
// running node says so.
func (c *RedisCluster) FinishMigration(ctx context.Context, slot int, from, to *Node) error {
	toID, err := to.ID(ctx)
	if err != nil {
		return err
	}
	s := strconv.Itoa(slot)
	order := []*Node{to, from}
	for _, n := range c.Nodes() {
		if n != to && n != from && n.Running() {
			order = append(order, n)
		}
	}
	for _, n := range order {
		if _, err := n.cmd1(ctx, "CLUSTER", "SETSLOT", s, "NODE", toID); err != nil {
			// A replica follows its primary's view; it may refuse
			// ("Please use SETSLOT only with masters" in Redis 7).
			if e := err.Error(); !strings.Contains(e, "slave") && !strings.Contains(e, "replica") && !strings.Contains(e, "only with masters") {
				return err
			}
		}
	}
	return c.await(ctx, fmt.Sprintf("slot %d to be %s's everywhere", slot, to.Addr()), func() error {
		for _, n := range c.Nodes() {
			if !n.Running() {
				continue
			}
			owner, err := n.slotOwner(ctx, slot)
			if err != nil {
				return err
			}
			if owner != toID {
				return fmt.Errorf("%s says slot %d is %s's", n.Addr(), slot, owner)
			}
		}
		return nil
	})
}

// slotOwner is the id of the node that n says serves slot.
func (n *Node) slotOwner(ctx context.Context, slot int) (string, error) {
	txt, err := n.cmd1(ctx, "CLUSTER", "NODES")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(strings.TrimSpace(txt), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue
			}
			lo, hi, isRange := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			b := a
			var err2 error
			if isRange {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 == nil && err2 == nil && a <= slot && slot <= b {
				return f[0], nil
			}
		}
	}
	return "", nil
}

// strings sends one command to the node over a fresh connection and
// returns its reply, an array of strings.
func (n *Node) strings(ctx context.Context, args ...string) ([]string, error) {
	const timeout = 5 * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := n.Conn().NewClient(n.Addr(), timeout)
	if err != nil {
		return nil, fmt.Errorf("redisproc: %s: %w", n.Addr(), err)
	}
	defer cl.Close()
	out, err := cl.Do(ctx, cl.B().Arbitrary(args...).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("redisproc: %s %s: %w", n.Addr(), strings.Join(args, " "), err)
	}
	return out, nil
}

// ClearStaleImports clears, on every running primary, an IMPORTING mark
// of a slot that another node serves and of which it holds no key, and
// returns the slots cleared. Such a mark is left by a migration abandoned
// before any key moved, and one was seen on a node after its whole
// cluster was killed and restarted; until it is cleared the node's view
// of the slots differs from the others' and WaitHealthy never passes. It
// is what `redis-cli --cluster fix` does for such a slot. A mark with
// keys, and every MIGRATING mark, is left alone: clearing it would hide
// keys from the slot's owner.
func (c *RedisCluster) ClearStaleImports(ctx context.Context) ([]int, error) {
	var cleared []int
	for _, n := range c.Nodes() {
		if !n.Running() {
			continue
		}
		txt, err := n.cmd1(ctx, "CLUSTER", "NODES")
		if err != nil {
			return cleared, err
		}
		var me []string
		for _, line := range strings.Split(strings.TrimSpace(txt), "\n") {
			if f := strings.Fields(line); len(f) >= 8 && strings.Contains(f[2], "myself") {
				me = f
			}
		}
		if me == nil || !strings.Contains(me[2], "master") {
			continue
		}
		for _, r := range me[8:] {
			s, ok := strings.CutPrefix(r, "[")
			if !ok || !strings.Contains(s, "-<-") {
				continue
			}
			slot, err := strconv.Atoi(s[:strings.Index(s, "-<-")])
			if err != nil {
				continue
			}
			owner, err := n.slotOwner(ctx, slot)
			if err != nil {
				return cleared, err
			}
			keys, err := n.cmd1(ctx, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot))
			if err != nil {
				return cleared, err
			}
			if owner == me[0] || keys != "0" {
				continue
			}
			if _, err := n.cmd1(ctx, "CLUSTER", "SETSLOT", strconv.Itoa(slot), "STABLE"); err != nil {
				return cleared, err
			}
			cleared = append(cleared, slot)
		}
	}
	return cleared, nil
}

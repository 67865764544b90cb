package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/redlock-bench/redlock/bench/engines"
)

// Files a chaos soak writes.
const (
	JSONFile    = "chaos.json"
	TextFile    = "chaos.txt"
	HistoryFile = "history.jsonl"
)

// finish fills the result from the oracle, the stores and the history,
// and judges it.
func (ch *chaos) finish(r *Result) {
	r.Attempts, r.Acquired, r.Reads, r.Failed = ch.attempts.Load(), ch.acquired.Load(), ch.reads.Load(), ch.failed.Load()
	r.Lost, r.Handoffs, r.Extensions = ch.lost.Load(), ch.handoffs.Load(), ch.extensions.Load()
	r.Violations, r.ViolationExamples = ch.or.Violations()
	r.TokensChecked, r.StaleTokens, r.StaleExamples = ch.or.StaleTokens()
	r.DoneLate, r.DoneLateExamples = ch.or.DoneLate()
	if h := ch.sentinelHaz; h != nil {
		h.mu.Lock()
		lw := h.counts
		h.mu.Unlock()
		r.SentinelLostWrites = &lw
	}
	if h := ch.sentinelHaz; h != nil && h.or != nil {
		// The hazard's resource is judged as the workers' are.
		n, ex := h.or.Violations()
		r.Violations += n
		r.ViolationExamples = append(r.ViolationExamples, ex...)
		checked, stale, sex := h.or.StaleTokens()
		r.TokensChecked += checked
		r.StaleTokens += stale
		r.StaleExamples = append(r.StaleExamples, sex...)
	}
	for _, s := range ch.stores {
		n := s.Counts()
		r.Store.Writes += n.Writes
		r.Store.Rejected += n.Rejected
		r.Store.Stale += n.Stale
		r.Store.StaleAccepted += n.StaleAccepted
		r.Store.FreshRejected += n.FreshRejected
	}
	ch.faultMu.Lock()
	r.Faults = map[string]int{}
	for k, v := range ch.faults {
		r.Faults[k] = v
	}
	r.FaultErrors = append([]string(nil), ch.faultErrors...)
	r.StaleImportsCleared = ch.staleImports.Load()
	for k, v := range ch.skipped {
		if r.FaultsSkipped == nil {
			r.FaultsSkipped = map[string]int{}
		}
		r.FaultsSkipped[k] = v
	}
	ch.faultMu.Unlock()

	if r.Class == OutOfModel {
		r.Passed = r.Store.StaleAccepted == 0
	} else {
		r.Passed = r.Violations == 0 && r.StaleTokens == 0 && r.Store.StaleAccepted == 0
	}
	r.Verdict = verdict(r)

	// The window: around the first failure, or out of model around the
	// first overlap, which is the hazard fencing answers.
	ch.histMu.Lock()
	hist := ch.history
	ch.histMu.Unlock()
	sort.SliceStable(hist, func(i, j int) bool { return hist[i].AtMs < hist[j].AtMs })
	at, reason := -1.0, ""
	if len(r.ViolationExamples) > 0 {
		v := r.ViolationExamples[0]
		at, reason = ms(v.At), fmt.Sprintf("violation on %s: %s acquired with %s of %s's hold left",
			v.Resource, ch.holder(v.Second), v.FirstLeft.Round(time.Microsecond), ch.holder(v.First))
	}
	if len(r.StaleExamples) > 0 && (at < 0 || ms(r.StaleExamples[0].At) < at) {
		s := r.StaleExamples[0]
		at, reason = ms(s.At), fmt.Sprintf("stale token on %s: %s got %d after %d", s.Resource, ch.holder(s.Holder), s.Token, s.Previous)
	}
	for _, e := range hist {
		if e.Kind == "write" && strings.HasPrefix(e.Detail, "stale, accepted") {
			if at < 0 || e.AtMs < at {
				at, reason = e.AtMs, fmt.Sprintf("stale write accepted on %s: %s with token %d", e.Resource, e.Who, e.Token)
			}
			break
		}
	}
	if at >= 0 {
		span := float64(ch.cfg.TTL.Milliseconds())
		r.WindowFromMs, r.WindowToMs, r.WindowReason = at-3*span, at+span, reason
		for _, e := range hist {
			if e.AtMs >= r.WindowFromMs && e.AtMs <= r.WindowToMs {
				r.Window = append(r.Window, e)
			}
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// holder names worker number id as the history does.
func (ch *chaos) holder(id int) string {
	if i := id - ch.cfg.Clients*ch.cfg.Workers; i >= len(hazardWho) {
		return sentinelHazardWho[i-len(hazardWho)]
	} else if i >= 0 {
		return hazardWho[i]
	}
	return fmt.Sprintf("c%d.w%d", id/ch.cfg.Workers, id%ch.cfg.Workers)
}

func verdict(r *Result) string {
	switch {
	case r.Class == OutOfModel && r.Passed:
		return fmt.Sprintf("PASS: fencing rejected every stale write (%d stale, 0 accepted); the lock itself let %d overlapping holds through, as expected out of model",
			r.Store.Stale, r.Violations)
	case r.Class == OutOfModel:
		return fmt.Sprintf("FAIL: %d stale writes accepted by the fenced store", r.Store.StaleAccepted)
	case r.Passed && strings.HasPrefix(r.Lock, "semaphore:"):
		return "PASS: never more holders than permits, no stale tokens, no stale write accepted"
	case r.Passed && strings.HasPrefix(r.Lock, "rw:"):
		return "PASS: no writer held beside another holder, no stale tokens, no stale write accepted"
	case r.Passed:
		return "PASS: no overlapping holds, no stale tokens, no stale write accepted"
	}
	return fmt.Sprintf("FAIL: %d violations, %d stale tokens, %d stale writes accepted", r.Violations, r.StaleTokens, r.Store.StaleAccepted)
}

// WriteJSON writes the result as chaos.json holds it.
func (r *Result) WriteJSON(w io.Writer) error {
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(j, '\n'))
	return err
}

// Line is the result in one line: the soak, its verdict, what it checked
// and the seed that replays it.
func (r *Result) Line() string {
	lock := r.Lock
	if lock == "" {
		lock = "mutex"
	}
	faults := 0
	for _, n := range r.Faults {
		faults += n
	}
	line := fmt.Sprintf("chaos %s, %s %s: %d locks checked, %d faults, %d violations, %d stale tokens, %d stale writes accepted, seed %d: %s",
		r.Class, r.Engine, lock, r.Acquired, faults, r.Violations, r.StaleTokens, r.Store.StaleAccepted, r.Seed, r.Verdict)
	if r.Interrupted {
		line += " (interrupted)"
	}
	return line
}

// WriteText writes the summary a person reads.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos %s, engine %s, seed %d\n", r.Class, r.Engine, r.Seed)
	if r.ClusterShards > 0 {
		fmt.Fprintf(&b, "clusters   %d votes of %d shards with a replica each: %s\n", len(r.Clusters), r.ClusterShards, engines.FormatClusters(r.Clusters))
	} else {
		fmt.Fprintf(&b, "masters    %s\n", strings.Join(r.Masters, " "))
	}
	for i, v := range r.Sentinels {
		nodes := ""
		if i < len(r.SentinelNodes) {
			nodes = " (data nodes " + strings.Join(r.SentinelNodes[i], " ") + ")"
		}
		seen := ""
		if i < len(r.SentinelRunIDChanges) {
			seen = fmt.Sprintf(", its master's run_id changed at least %d time(s) for every client", r.SentinelRunIDChanges[i])
		}
		fmt.Fprintf(&b, "sentinel   %s%s%s\n", v, nodes, seen)
	}
	lock := r.Lock
	if lock == "" {
		lock = "mutex"
	}
	fmt.Fprintf(&b, "load       %d clients x %d workers on %d resources, lock %s, ttl %dms, every feature on (gate, hand-off, auto-extend, fencing, notifications)\n",
		r.Clients, r.Workers, r.Resources, lock, r.TTLMs)
	interrupted := ""
	if r.Interrupted {
		interrupted = " (interrupted: partial results)"
	}
	fmt.Fprintf(&b, "duration   %.1fs%s\n", r.DurationS, interrupted)
	var fs []string
	total := 0
	for _, k := range faultKinds(r.Faults) {
		fs = append(fs, fmt.Sprintf("%s %d", k, r.Faults[k]))
		total += r.Faults[k]
	}
	fmt.Fprintf(&b, "faults     %d injected: %s\n", total, strings.Join(fs, ", "))
	if len(r.FaultsSkipped) > 0 {
		var sk []string
		for _, k := range faultKinds(r.FaultsSkipped) {
			sk = append(sk, fmt.Sprintf("%s %d", k, r.FaultsSkipped[k]))
		}
		fmt.Fprintf(&b, "           skipped, another vote still affected: %s\n", strings.Join(sk, ", "))
	}
	if lw := r.SentinelLostWrites; lw != nil && lw.SetUp > 0 {
		fmt.Fprintf(&b, "           %d failover(s) lost a hold's write: the second client granted it while the first held %d time(s), refused with the promoted master quarantined %d\n",
			lw.SetUp, lw.Granted, lw.Quarantined)
	}
	if r.StaleImportsCleared > 0 {
		fmt.Fprintf(&b, "           heals cleared %d stale IMPORTING mark(s) of slots\n", r.StaleImportsCleared)
	}
	if len(r.FaultErrors) > 0 {
		fmt.Fprintf(&b, "           %d failed to apply or lift, first: %s\n", len(r.FaultErrors), r.FaultErrors[0])
	}
	reads := ""
	if strings.HasPrefix(r.Lock, "rw:") {
		reads = fmt.Sprintf(" (%d reads, %d writes)", r.Reads, r.Acquired-r.Reads)
	}
	fmt.Fprintf(&b, "locks      %d checked%s of %d attempts (%d failed), %d lost (Done before release), %d handed off, %d extensions\n",
		r.Acquired, reads, r.Attempts, r.Failed, r.Lost, r.Handoffs, r.Extensions)
	fmt.Fprintf(&b, "violations %d\n", r.Violations)
	for _, v := range r.ViolationExamples {
		if v.Holders > 0 {
			fmt.Fprintf(&b, "           %s at %.1fms: %d holders, holder %d the last to begin, holder %d's hold with %s left\n",
				v.Resource, ms(v.At), v.Holders, v.Second, v.First, v.FirstLeft.Round(time.Microsecond))
			continue
		}
		fmt.Fprintf(&b, "           %s at %.1fms: holder %d acquired with %s of holder %d's hold left\n",
			v.Resource, ms(v.At), v.Second, v.FirstLeft.Round(time.Microsecond), v.First)
	}
	fmt.Fprintf(&b, "tokens     %d checked, %d stale\n", r.TokensChecked, r.StaleTokens)
	for _, s := range r.StaleExamples {
		fmt.Fprintf(&b, "           %s at %.1fms: holder %d got %d after %d\n", s.Resource, ms(s.At), s.Holder, s.Token, s.Previous)
	}
	fmt.Fprintf(&b, "done-late  %d (validity ran out with Done still open when the next holder acquired)\n", r.DoneLate)
	fmt.Fprintf(&b, "store      %d writes, %d rejected, %d stale, %d stale accepted, %d of the latest holder rejected\n",
		r.Store.Writes, r.Store.Rejected, r.Store.Stale, r.Store.StaleAccepted, r.Store.FreshRejected)
	fmt.Fprintf(&b, "expected   %s\n", r.Expected)
	fmt.Fprintf(&b, "verdict    %s\n", r.Verdict)
	if r.WindowReason != "" {
		fmt.Fprintf(&b, "\nhistory %.1fms..%.1fms around the %s (%d events; all in %s):\n",
			r.WindowFromMs, r.WindowToMs, r.WindowReason, len(r.Window), HistoryFile)
		shown := 0
		for _, e := range r.Window {
			if e.Kind == "fault" || e.Kind == "heal" || aboutResource(r.WindowReason, e.Resource) {
				if shown++; shown > 200 {
					fmt.Fprintf(&b, "  ...\n")
					break
				}
				fmt.Fprintf(&b, "  %10.1fms %-8s %-8s %-4s token %-18d valid %8.1fms %s\n",
					e.AtMs, e.Kind, e.Who, e.Resource, e.Token, e.ValidMs, e.Detail)
			}
		}
	}
	fmt.Fprintf(&b, "replay     %s\n", r.Replay())
	_, err := io.WriteString(w, b.String())
	return err
}

// aboutResource reports whether the window's reason names one of the
// resources of an event ("r1", or "r0,r3,r4" for a lease on several).
func aboutResource(reason, resources string) bool {
	for _, r := range strings.Split(resources, ",") {
		if strings.Contains(reason, " "+r+":") {
			return true
		}
	}
	return false
}

// Replay is the chaos command's flags that replay this soak's schedule.
// On given masters it names them, and the user and --tls; the password
// and the TLS files are to be given again.
func (r *Result) Replay() string {
	s := fmt.Sprintf("--seed %d --class %s --engine %s --clients %d --workers %d --resources %d --ttl %dms --duration %.0fs",
		r.Seed, r.Class, r.Engine, r.Clients, r.Workers, r.Resources, r.TTLMs, r.DurationS)
	if r.Lock != "" && r.Lock != "mutex" {
		s += " --lock " + r.Lock
	}
	if r.Quarantine != "" {
		s += " --quarantine " + r.Quarantine
	}
	if r.ClusterShards > 0 {
		s += fmt.Sprintf(" --cluster-shards %d", r.ClusterShards)
		if len(r.Clusters) > 0 {
			s += fmt.Sprintf(" --local-masters %d", len(r.Clusters))
		}
	}
	if r.SentinelVotes > 0 {
		s += fmt.Sprintf(" --sentinel-votes %d --local-masters %d", r.SentinelVotes, len(r.Masters)+r.SentinelVotes)
	}
	if r.JumpMs > 0 {
		s += fmt.Sprintf(" --jump %dms", r.JumpMs)
	}
	if !r.LocalMasters && len(r.Masters) > 0 {
		s += " --masters " + strings.Join(r.Masters, ",")
		if r.User != "" {
			s += " --user " + r.User
		}
		if r.TLS {
			s += " --tls"
		}
	}
	return s
}

// Write writes chaos.json, chaos.txt and, when there is a window,
// history.jsonl into dir.
func Write(dir string, r *Result) error {
	var j strings.Builder
	if err := r.WriteJSON(&j); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, JSONFile), []byte(j.String()), 0o644); err != nil {
		return fmt.Errorf("write chaos result: %w", err)
	}
	var t strings.Builder
	r.WriteText(&t)
	if err := os.WriteFile(filepath.Join(dir, TextFile), []byte(t.String()), 0o644); err != nil {
		return fmt.Errorf("write chaos result: %w", err)
	}
	if len(r.Window) == 0 {
		return nil
	}
	f, err := os.Create(filepath.Join(dir, HistoryFile))
	if err != nil {
		return fmt.Errorf("write chaos history: %w", err)
	}
	bw := bufio.NewWriter(f)
	enc := json.NewEncoder(bw)
	for _, e := range r.Window {
		if err := enc.Encode(e); err != nil {
			f.Close()
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

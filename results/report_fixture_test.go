package results

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// synthRun describes a deterministic run: per-second acquisitions, and a
// latency distribution given by its quantile function.
type synthRun struct {
	label, engine, mode string
	workers             int
	rate                float64
	start               time.Time
	warmupS, seconds    int
	perSec              func(sec int) int64
	latencyUs           func(q float64) float64 // quantile function of acquire latency
	slowdown            func(sec int) float64   // latency multiplier per second; nil for 1
	holdUs              float64
	ttl                 string
	faults              []map[string]any
	hostname            string
	// errorsAt gives a measured second's errors, and how many of them
	// were no_quorum (the others are timeouts); none when nil.
	errorsAt func(sec int) (errs, noQuorum int64)
	// masterRTTUs gives master m's PING round trip in a second (the
	// warm-up's are negative), -1 for none; intervals.json has none when
	// nil.
	masterRTTUs func(sec, m int) int64
	extra       map[string]any // fields added to summary.json as they are
}

// synthSamples is how many quantiles stand for each second's values.
const synthSamples = 200

// record adds n values drawn evenly from the quantile function f.
func recordQuantiles(set *Set, k Kind, n int64, f func(q float64) float64) {
	if n <= 0 {
		return
	}
	per, rest := n/synthSamples, n%synthSamples
	for j := int64(0); j < synthSamples; j++ {
		c := per
		if j < rest {
			c++
		}
		if c == 0 {
			continue
		}
		v := int64(math.Round(f((float64(j) + 0.5) / synthSamples)))
		v = max(v, 0)
		_ = set[k].RecordValues(v, c)
	}
}

// writeSynthRun writes a complete run directory (summary.json and .txt,
// .hgrm, histograms.hlog, intervals.hlog) and returns its summary.
func writeSynthRun(t testing.TB, dir string, r synthRun) *Summary {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if r.engine == "" {
		r.engine = "redlock"
	}
	if r.mode == "" {
		r.mode = "try"
	}
	if r.ttl == "" {
		r.ttl = "10s"
	}
	if r.hostname == "" {
		r.hostname = "bench-1"
	}
	primary := Acquire
	if r.mode == "wait" {
		primary = Wait
	}
	measure := r.start.Add(time.Duration(r.warmupS) * time.Second)
	var hl bytes.Buffer
	l, err := NewIntervalLog(&hl, measure, "synthetic")
	if err != nil {
		t.Fatal(err)
	}
	total := NewSet()
	var acquired, failed, timeouts, noQuorum int64
	var ivs []Interval
	second := func(sec int, n int64) Interval {
		iv := Interval{TS: float64(r.warmupS + sec), LengthS: 1, Warmup: sec < 0, Acquired: n, AcquiredPerS: float64(n), FaultsActive: []string{}}
		if r.errorsAt != nil && sec >= 0 {
			iv.Errors, iv.NoQuorum = r.errorsAt(sec)
		}
		if r.masterRTTUs != nil {
			for m := range 5 {
				iv.MasterRTTUs = append(iv.MasterRTTUs, r.masterRTTUs(sec, m))
			}
		}
		return iv
	}
	for sec := -r.warmupS; sec < 0; sec++ {
		ivs = append(ivs, second(sec, 0))
	}
	for sec := 0; sec < r.seconds; sec++ {
		iv := NewSet()
		n := r.perSec(sec)
		slow := 1.0
		if r.slowdown != nil {
			slow = r.slowdown(sec)
		}
		lat := func(q float64) float64 { return r.latencyUs(q) * slow }
		recordQuantiles(iv, primary, n, lat)
		recordQuantiles(iv, AcquireFail, n/10, func(q float64) float64 { return lat(q) / 2 })
		recordQuantiles(iv, Release, n, func(q float64) float64 { return lat(q) / 3 })
		recordQuantiles(iv, Hold, n, func(q float64) float64 { return r.holdUs * (0.5 + q) })
		from := measure.Add(time.Duration(sec) * time.Second)
		for _, k := range []Kind{primary, AcquireFail, Release, Hold} {
			if err := l.Write(k.String(), from, from.Add(time.Second), iv[k]); err != nil {
				t.Fatal(err)
			}
		}
		total.Merge(iv)
		acquired += n
		failed += n / 10
		rec := second(sec, n)
		timeouts += rec.Errors - rec.NoQuorum
		noQuorum += rec.NoQuorum
		ivs = append(ivs, rec)
	}
	if err := os.WriteFile(filepath.Join(dir, IntervalsLog), hl.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	load := "closed"
	if r.rate > 0 {
		load = "open"
	}
	s := &Summary{
		Engine: r.engine,
		Label:  r.label,
		Config: RunConfig{
			Engine: r.engine, Workers: r.workers, Rate: r.rate, TTL: r.ttl, Mode: r.mode,
			Duration: (time.Duration(r.seconds) * time.Second).String(), Warmup: (time.Duration(r.warmupS) * time.Second).String(),
			Hold: "exp:1ms", Resources: 1000, Distribution: "uniform", Check: true, Seed: 1, Clients: 1,
			KeyPrefix: "rlb:", Quarantine: "observed", LocalMasters: 5, Label: r.label, WaitTimeout: "5s",
		},

		Machine:      Machine{Hostname: r.hostname, OS: "linux", Arch: "amd64", CPUs: 2, GOMAXPROCS: 2, GoVersion: "go1.26.0", RedisVersion: "7.0.15"},
		Masters:      []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:7004", "127.0.0.1:7005"},
		LocalMasters: true,
		StartedAt:    r.start.UTC(),
		WarmupS:      float64(r.warmupS),
		DurationS:    float64(r.seconds),
		Mode:         r.mode,
		LoadModel:    load,
		Attempts:     acquired + failed,
		Acquired:     acquired,
		Contended:    failed,
		Errors:       map[string]int64{"no_quorum": noQuorum, "timeout": timeouts, "other": 0, "release": 0},
		Checked:      true,
	}
	s.Attempts += noQuorum + timeouts
	if r.seconds > 0 {
		s.AcquiredPerSec = math.Round(float64(acquired)/float64(r.seconds)*10) / 10
	}
	s.SetLatencies(total)
	if err := (&Run{Summary: s, Histograms: total, Intervals: ivs}).WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	if len(r.faults) > 0 || len(r.extra) > 0 {
		// Fields this version's Summary may not have: add them to the JSON.
		b, err := os.ReadFile(filepath.Join(dir, SummaryJSON))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if len(r.faults) > 0 {
			m["faults"] = r.faults
		}
		for k, v := range r.extra {
			m[k] = v
		}
		out, _ := json.MarshalIndent(m, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, SummaryJSON), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// exponential is the quantile function of an exponential distribution of
// mean meanUs, shifted by baseUs.
func exponential(baseUs, meanUs float64) func(q float64) float64 {
	return func(q float64) float64 { return baseUs - meanUs*math.Log(1-q) }
}

var synthStart = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// writeSynthSweep writes a closed-loop sweep of workers 1..1024 over a
// system that serves 2000 acquisitions/s per worker up to 40000/s:
// throughput stops growing at 64 workers (the knee), and p99 < 5ms holds up
// to 16 workers. At 1024 workers some attempts time out: that step is
// DEGRADED.
func writeSynthSweep(t testing.TB, dir string, slo *SLO) *Sweep {
	t.Helper()
	values := []float64{1, 4, 16, 64, 256, 1024}
	sw := &Sweep{
		Kind: "sweep", Label: "sweep-workers-redlock-r1000-try", Param: "workers", Values: values,
		Engine: "redlock", Mode: "try", LoadModel: "closed", Latency: "acquire",
		Config: map[string]any{
			"engine": "redlock", "workers": "1,4,16,64,256,1024", "rate": 0.0, "ttl": "10s", "mode": "try",
			"duration": "3s", "warmup": "1s", "hold": "exp:1ms", "resources": 1000.0, "distribution": "uniform",
			"check": true, "seed": 1.0, "clients": 1.0, "key_prefix": "rlb:", "quarantine": "observed", "masters": "127.0.0.1:7001,127.0.0.1:7002",
			"local_masters": 5.0, "ops": 0.0, "label": "sweep-workers-redlock-r1000-try", "wait_timeout": "5s",
		},
		Machine:      Machine{Hostname: "bench-1", OS: "linux", Arch: "amd64", CPUs: 2, GOMAXPROCS: 2, GoVersion: "go1.26.0", RedisVersion: "7.0.15"},
		Masters:      []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:7004", "127.0.0.1:7005"},
		LocalMasters: true,
		StartedAt:    synthStart,
		SLO:          slo,
	}
	for i, w := range values {
		tp := math.Min(2000*w, 40000)
		if w > 256 {
			tp = 38000 // contention: more workers, fewer acquisitions
		}
		meanUs := w / tp * 1e6 // Little's law
		label := fmt.Sprintf("redlock-w%d-r1000-try", int(w))
		name := fmt.Sprintf("%02d-%s", i+1, label)
		var errorsAt func(int) (int64, int64)
		if w == 1024 {
			errorsAt = func(int) (int64, int64) { return 80, 0 }
		}
		s := writeSynthRun(t, filepath.Join(dir, name), synthRun{
			label: label, workers: int(w),
			start: synthStart.Add(time.Duration(i*5) * time.Second), warmupS: 1, seconds: 3,
			perSec:    func(int) int64 { return int64(tp) },
			latencyUs: exponential(0, meanUs),
			holdUs:    1000,
			errorsAt:  errorsAt,
			// The masters slow down as the load grows; master 3 is
			// further away.
			masterRTTUs: func(sec, m int) int64 { return int64(120 + 15*m + 200*boolInt(m == 3) + int(w)/4 + 7*(sec%2)) },
		})
		sw.Points = append(sw.Points, PointFromSummary(i, w, name, s, Acquire))
	}
	sw.Analyze()
	var b bytes.Buffer
	if err := WriteSweepJSON(&b, sw); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SweepJSON), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return sw
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

package api

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/metrics/pkg/apis/metrics"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// held is a request of user that came through the handler filter, and its hold.
func held(user string) (context.Context, *answerHold) { return withAnswerHold(asUser(user)) }

// TestAnswerBudget: what takes room in the answer budget and what waits, refused with 429 naming the flag.
func TestAnswerBudget(t *testing.T) {
	const budget = 1 << 20
	type take struct {
		user    string
		bytes   int64
		wantErr bool // 429 after the wait
	}
	tests := []struct {
		name  string
		takes []take
		want  int64 // in flight after
	}{
		{"small answers take nothing", []take{{"a", smallAnswer - 1, false}, {"a", smallAnswer - 1, false}}, 0},
		{"a user's quarter", []take{{"a", budget / 8, false}, {"a", budget / 8, false}, {"a", budget / 8, true}}, budget / 4},
		{"a user holding nothing takes one of any size", []take{{"a", budget / 2, false}, {"a", budget / 8, true}}, budget / 2},
		{"larger than the budget: the whole budget", []take{{"a", 4 * budget, false}, {"b", budget / 8, true}}, budget},
		{"other users fill the rest", []take{{"a", budget / 2, false}, {"b", budget / 4, false}, {"c", budget / 4, false},
			{"d", smallAnswer, true}, {"d", smallAnswer - 1, false}}, budget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAnswerBudget(budget)
			a.after = func(time.Duration) <-chan time.Time { // the wait is over at once
				c := make(chan time.Time)
				close(c)
				return c
			}
			for i, tk := range tt.takes {
				ctx, hold := held(tk.user)
				defer hold.release()
				err := a.take(ctx, tk.bytes, true)
				if tk.wantErr != (err != nil) {
					t.Fatalf("take %d (%s, %d bytes): %v, want an error: %v", i, tk.user, tk.bytes, err, tk.wantErr)
				}
				if err != nil && (!apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "--answer-bytes")) {
					t.Errorf("take %d: %v, want 429 naming --answer-bytes", i, err)
				}
			}
			if total, _ := a.usage(""); total != tt.want {
				t.Errorf("%d bytes in flight, want %d", total, tt.want)
			}
		})
	}
}

// TestAnswerRoomGivenBack: a request waiting for room gets it as soon as another's response is written, and a
// request holding room never waits for more; when every response is written nothing is left in flight.
func TestAnswerRoomGivenBack(t *testing.T) {
	a := newAnswerBudget(1 << 20)
	ctxA, holdA := held("a")
	if err := a.take(ctxA, 1<<20, true); err != nil {
		t.Fatal(err)
	}
	if err := a.take(ctxA, 1<<19, true); err != nil { // its table: no waiting for room it holds
		t.Fatalf("more for a request holding room: %v", err)
	}
	ctxB, holdB := held("b")
	if err := a.take(ctxB, 1<<19, false); err == nil {
		t.Fatal("b took room a holds")
	} else if _, ok := isNoRoom(err); !ok {
		t.Fatalf("b without waiting: %v, want noRoom", err)
	}
	done := make(chan error, 1)
	go func() { done <- a.reserve(ctxB, 1<<19) }()
	holdA.release()
	if err := <-done; err != nil {
		t.Fatalf("b waiting for the room a gave back: %v", err)
	}
	if err := a.take(ctxB, 1<<19, false); err != nil {
		t.Fatalf("b's answer in the room it reserved: %v", err)
	}
	holdB.release()
	if total, _ := a.usage(""); total != 0 {
		t.Errorf("%d bytes in flight once every response is written", total)
	}
}

// TestGoneRequestBuildsNothing: a request whose client went away before it was served takes no build slot and
// builds nothing, for a list, a page and a table alike.
func TestGoneRequestBuildsNothing(t *testing.T) {
	_, k, s, _ := hookedPods(t, 2000)
	ctx, hold := held("gone")
	defer hold.release()
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	for _, limit := range []int64{0, 600} {
		opts := listOpts(t, fmt.Sprintf("x!=v%d", limit), "")
		opts.Limit = limit
		if _, err := s.List(ctx, opts); err == nil {
			t.Errorf("limit %d: a gone request was answered", limit)
		}
	}
	if n := k.builds.Load(); n != 0 {
		t.Errorf("gone requests made %d builds, want none", n)
	}
	if n := s.limit.busy(); n != 0 {
		t.Errorf("gone requests hold %d build slots", n)
	}
	if _, err := s.ConvertToTable(ctx, &metrics.PodMetricsList{Items: make([]metrics.PodMetrics, 2000)}, nil); err == nil {
		t.Error("a gone request's table was made")
	}
}

// TestAnswerEstimates: the answer budget's estimate of a list's JSON and of a table's rows is within a factor of
// two of their size (the table's on the heap, with the metadata the server puts in each row, and encoded).
func TestAnswerEstimates(t *testing.T) {
	for _, containers := range []int{1, 3} {
		es := podEntries(2000, containers, "some-namespace", "container-")
		list := podKind{}.list(es, "1234567890123-abcdef", metav1.Now())
		data, err := kruntime.Encode(codecs.LegacyCodec(metricsv1beta1.SchemeGroupVersion), list)
		if err != nil {
			t.Fatal(err)
		}
		if est, got := answerBytes(es)-listBytes(es), int64(len(data)); est < got/2 || est > 2*got {
			t.Errorf("%d containers a pod: 2,000 pods' JSON estimated at %d bytes, %d encoded", containers, est, got)
		}
		// One reading of five within the bounds will do: other tests' goroutines may free memory between the two
		// heap readings (TestKeeperEstimates read 168 KB for a 2 MB list so), and a wrong estimate misses all five.
		est, got := tableBytes(len(es)), int64(0)
		for range 5 {
			runtime.GC() // twice: the encoder's pooled buffers go at the second
			before := heapInUse()
			table, err := (&metricsREST[storage.PodPoint]{kind: podKind{}}).ConvertToTable(asUser("a"), list, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range table.Rows {
				m := table.Rows[i].Object.Object.(*metrics.PodMetrics)
				table.Rows[i].Object.Object = &metav1.PartialObjectMetadata{ObjectMeta: m.ObjectMeta}
			}
			used := heapInUse() - before
			encoded, err := json.Marshal(table)
			if err != nil {
				t.Fatal(err)
			}
			if got = used + int64(len(encoded)); est >= got/2 && est <= 2*got {
				break
			}
		}
		runtime.KeepAlive(list)
		if est < got/2 || est > 2*got {
			t.Errorf("%d containers a pod: a table of 2,000 estimated at %d bytes, %d on the heap and encoded",
				containers, est, got)
		}
	}
}

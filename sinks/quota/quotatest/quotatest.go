// Package quotatest races puts against a budget, for the memory and
// artifact sinks' tests.
package quotatest

import (
	"errors"
	"sync"
	"testing"

	"github.com/gatehouse/gatehouse/sinks/quota"
)

// Race runs put(g, i) for i < each in each of goroutines goroutines at
// once and returns how many succeeded. A put may fail only with a
// *quota.Error; any other error fails the test.
func Race(t testing.TB, goroutines, each int, put func(g, i int) error) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				err := put(g, i)
				var qe *quota.Error
				if err != nil && !errors.As(err, &qe) {
					t.Error(err)
				}
				if err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return ok
}

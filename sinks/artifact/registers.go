package artifact

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// redisRegister keeps entries as Redis hashes (fields v, the entry's JSON,
// and rev) at prefix + the hex of the tenant; swap is one Lua script.
type redisRegister struct {
	rdb    *redis.Client
	prefix string
}

var redisSwap = redis.NewScript(`
local r = tonumber(redis.call('HGET', KEYS[1], 'rev') or '0')
if r ~= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'rev', r + 1)
return r + 1
`)

func (r redisRegister) key(tenant string) string {
	return r.prefix + hex.EncodeToString([]byte(tenant))
}

func (r redisRegister) load(ctx context.Context, tenant string) (entry, uint64, bool, error) {
	vals, err := r.rdb.HMGet(ctx, r.key(tenant), "v", "rev").Result()
	if err != nil {
		return entry{}, 0, false, fmt.Errorf("%w: quota ledger: %v", ErrUnavailable, err)
	}
	v, ok := vals[0].(string)
	if !ok {
		return entry{}, 0, false, nil
	}
	revs, _ := vals[1].(string)
	rev, err := strconv.ParseUint(revs, 10, 64)
	var e entry
	if err == nil {
		err = json.Unmarshal([]byte(v), &e)
	}
	if err != nil {
		return entry{}, 0, false, fmt.Errorf("%w: quota ledger of %s: %v", ErrStore, tenant, err)
	}
	return e, rev, true, nil
}

func (r redisRegister) swap(ctx context.Context, tenant string, e entry, rev uint64) (uint64, error) {
	b, _ := json.Marshal(e)
	n, err := redisSwap.Run(ctx, r.rdb, []string{r.key(tenant)}, b, rev).Uint64()
	if err != nil {
		return 0, fmt.Errorf("%w: quota ledger: %v", ErrUnavailable, err)
	}
	if n == 0 {
		return 0, errSwapLost
	}
	return n, nil
}

// quotaDir holds a folder store's ledgers, .quota/<tenant> (the entry and
// its revision) beside .quota/<tenant>~lock, which swap holds with flock,
// so every process on the host that shares the folder takes turns. No
// tenant segment starts with '.', and none holds a '~' after its first
// byte (TenantDir), so no lock file is another tenant's ledger (a ".lock"
// suffix was: tenant "acme"'s lock was tenant "acme.lock"'s ledger).
const quotaDir = ".quota"

func ledgerPath(tenant string) string { return path.Join(quotaDir, tenant) }
func lockPath(tenant string) string   { return path.Join(quotaDir, tenant+"~lock") }

type dirRegister struct{ root *os.Root }

type dirEntry struct {
	entry
	Rev uint64 `json:"rev"`
}

func (d dirRegister) load(_ context.Context, tenant string) (entry, uint64, bool, error) {
	b, err := d.root.ReadFile(ledgerPath(tenant))
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(b) == 0) {
		// None; an empty file is never a ledger (swap writes whole files)
		// but can be the lock file an older Gatehouse kept here.
		return entry{}, 0, false, nil
	}
	var de dirEntry
	if err == nil {
		err = json.Unmarshal(b, &de)
	}
	if err != nil {
		return entry{}, 0, false, fmt.Errorf("%w: quota ledger of %s: %v", ErrStore, tenant, err)
	}
	return de.entry, de.Rev, true, nil
}

func (d dirRegister) swap(ctx context.Context, tenant string, e entry, rev uint64) (uint64, error) {
	if err := d.root.MkdirAll(quotaDir, 0o750); err != nil {
		return 0, fmt.Errorf("%w: quota ledger: %v", ErrStore, err)
	}
	f, err := d.root.OpenFile(lockPath(tenant), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return 0, fmt.Errorf("%w: quota ledger: %v", ErrStore, err)
	}
	defer f.Close() // releases the lock
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return 0, fmt.Errorf("%w: quota ledger: %v", ErrStore, err)
	}
	_, cur, _, err := d.load(ctx, tenant)
	if err != nil {
		return 0, err
	}
	if cur != rev {
		return 0, errSwapLost
	}
	b, _ := json.Marshal(dirEntry{entry: e, Rev: rev + 1})
	if err := writeFile(d.root, ledgerPath(tenant), b); err != nil {
		return 0, fmt.Errorf("%w: quota ledger: %v", ErrStore, err)
	}
	return rev + 1, nil
}

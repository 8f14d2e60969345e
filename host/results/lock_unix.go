//go:build unix

package results

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// tryFlock takes an exclusive flock on f if no other open file holds it,
// without waiting, and reports whether it did.
func tryFlock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case !errors.Is(err, syscall.EINTR):
			return false, err
		}
	}
}

// flock takes an exclusive flock on f, waiting as long as another open
// file holds it.
func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// funlock releases the flock on f.
func funlock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

// processGone reports whether no process with the given id exists on this
// machine. A process of another user (EPERM) exists.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// lockHolderPID returns the process that holds a flock on the file f has
// open, or 0 when it cannot tell (Linux only). /proc/locks names the
// process that took the lock; when that one has ended (flock(1) locks a
// descriptor it leaves to its parent), the holder is the process whose
// open file carries the lock (a "lock:" line in /proc/<pid>/fdinfo/<fd>).
func lockHolderPID(f *os.File) int {
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer func() { _ = locks.Close() }()
	ino := fmt.Sprintf(":%d", sys.Ino)
	taker := 0
	sc := bufio.NewScanner(locks)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF"; waiters have
		// "->" after the number.
		fl := strings.Fields(sc.Text())
		if len(fl) < 6 || fl[1] != "FLOCK" || !strings.HasSuffix(fl[5], ino) {
			continue
		}
		if pid, err := strconv.Atoi(fl[4]); err == nil && pid != os.Getpid() {
			taker = pid
			break
		}
	}
	if taker > 0 && !processGone(taker) {
		return taker
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := "/proc/" + p.Name()
		fds, _ := os.ReadDir(dir + "/fd")
		for _, fd := range fds {
			var fst syscall.Stat_t
			if syscall.Stat(dir+"/fd/"+fd.Name(), &fst) != nil || fst.Ino != sys.Ino || fst.Dev != sys.Dev {
				continue
			}
			info, _ := os.ReadFile(dir + "/fdinfo/" + fd.Name())
			for _, l := range strings.Split(string(info), "\n") {
				if strings.HasPrefix(l, "lock:") && strings.Contains(l, "FLOCK") && !strings.Contains(l, "->") {
					return pid
				}
			}
		}
	}
	return taker
}

// processStopped reports whether process pid is stopped (SIGSTOP, Ctrl-Z,
// a debugger), from /proc/<pid>/stat (Linux); false when it cannot tell.
func processStopped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'T' || b[i+2] == 't'
}

// Flags of OpenFile.
const (
	oNoFollow = syscall.O_NOFOLLOW
	oNonBlock = syscall.O_NONBLOCK
)

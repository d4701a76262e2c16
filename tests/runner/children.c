#include "children.h"

#include "clock.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* The children t_fork started and nobody has reaped yet (0: a free place). */
#define MAX_CHILDREN 64
static volatile pid_t children[MAX_CHILDREN];

void t_child_adopt(pid_t pid) {
  for (int i = 0; pid > 0 && i < MAX_CHILDREN; i++)
    if (children[i] == 0) {
      children[i] = pid;
      break;
    }
}

pid_t t_fork(void) {
  pid_t parent = getpid();
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* the suite's process died before the line above */
      _exit(127);
    return 0;
  }
  t_child_adopt(pid);
  return pid;
}

void t_child_reaped(pid_t pid) {
  for (int i = 0; pid > 0 && i < MAX_CHILDREN; i++)
    if (children[i] == pid)
      children[i] = 0;
}

int t_child_wait(pid_t pid, int timeout_ms) {
  long deadline = t_now_ms() + timeout_ms;
  int status = -1;
  while (t_now_ms() < deadline) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) {
      t_child_reaped(pid);
      return r == pid ? status : -1;
    }
    usleep(2000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  t_child_reaped(pid);
  return -1;
}

void t_kill_children(void) {
  for (int i = 0; i < MAX_CHILDREN; i++)
    if (children[i] > 0)
      kill(children[i], SIGKILL);
}

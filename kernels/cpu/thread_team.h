#pragma once
// Waiting for the OpenMP thread team before timing on it (See Note [Trials on a waking thread
// team] in thread_team.cpp).

namespace tessera::cpu {

// Returns once a parallel region of the calling thread's OpenMP team (omp_get_max_threads()
// threads) runs in about the time its threads' own work takes, or after a budget of 300 ms; at
// once for a team of one and for a team size already waited for in this process.
void wait_until_thread_team_awake();

}  // namespace tessera::cpu

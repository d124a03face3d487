/* mpiring: a ring and collectives with known calls and bytes per rank, for the mpi family (issue
 * 18). Each rank: 10 x (MPI_Sendrecv of 1000 doubles to the next rank, from the previous), 5 x
 * MPI_Allreduce of 256 doubles, 1 x MPI_Bcast of 100 ints from rank 0, 2 x MPI_Barrier; rank 0
 * MPI_Send's 3 messages of 4096 bytes to rank 1, which MPI_Recv's them. Before the final
 * barrier every rank but the last computes for argv[1] ms x (rank + 1) (the imbalance); prints
 * "rank R ok" from each rank. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void compute(long ms) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    volatile double x = 0;
    do {
        for (int i = 0; i < 10000; i++) x += i * 0.5;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long ms = argc > 1 ? atol(argv[1]) : 0;
    static double a[1000], b[1000], r[256], s[256];
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int i = 0; i < 10; i++)
        MPI_Sendrecv(a, 1000, MPI_DOUBLE, next, 7, b, 1000, MPI_DOUBLE, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < 5; i++) MPI_Allreduce(s, r, 256, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    int v[100] = {0};
    MPI_Bcast(v, 100, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    char msg[4096] = {0};
    for (int i = 0; i < 3 && size > 1; i++) {
        if (rank == 0) MPI_Send(msg, 4096, MPI_CHAR, 1, 9, MPI_COMM_WORLD);
        if (rank == 1) MPI_Recv(msg, 4096, MPI_CHAR, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (rank != size - 1) compute(ms * (rank + 1));
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d ok\n", rank);
    MPI_Finalize();
    return 0;
}

/* The few MPI calls ginbench's bootstrap makes, as a small shared library.
 *
 * build.rs compiles it with the MPI compiler wrapper ($MPICC -shared -fPIC) and embeds it in the
 * binaries; src/bootstrap/mpi.rs loads it only when the process was started by an MPI launcher.
 * So the binaries themselves never link libmpi and start on machines without MPI.
 *
 * Only calls that every MPI since 2.0 has (Open MPI 4 and 5, MPICH) and only MPI_COMM_WORLD.
 * MPI is used from the main thread only (bootstrap bytes, results), hence MPI_THREAD_FUNNELED.
 * Every function returns an MPI error code (MPI_SUCCESS is 0).
 */
#include <mpi.h>
#include <string.h>

/* Initialise MPI; rank and size of MPI_COMM_WORLD. */
int gb_mpi_init(int *rank, int *size) {
    int provided = 0, rc, done = 0;
    rc = MPI_Initialized(&done);
    if (rc != MPI_SUCCESS) return rc;
    if (!done) {
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) return rc;
    }
    /* Return errors instead of aborting inside MPI, so the caller can report them. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rc = MPI_Comm_rank(MPI_COMM_WORLD, rank);
    if (rc != MPI_SUCCESS) return rc;
    return MPI_Comm_size(MPI_COMM_WORLD, size);
}

/* Every rank's int, in rank order (`all` holds one per rank). */
int gb_mpi_allgather_int(int mine, int *all) {
    return MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
}

/* Every rank's bytes: rank r's `counts[r]` bytes land at `out + displs[r]`. */
int gb_mpi_allgatherv_bytes(const void *mine, int len, void *out, const int *counts, const int *displs) {
    /* MPI-2 prototypes take a non-const send buffer. */
    return MPI_Allgatherv((void *)mine, len, MPI_BYTE, out, (int *)counts, (int *)displs, MPI_BYTE, MPI_COMM_WORLD);
}

int gb_mpi_barrier(void) { return MPI_Barrier(MPI_COMM_WORLD); }

int gb_mpi_finalize(void) {
    int done = 0;
    MPI_Finalized(&done);
    return done ? MPI_SUCCESS : MPI_Finalize();
}

int gb_mpi_abort(int code) { return MPI_Abort(MPI_COMM_WORLD, code); }

/* The text of an MPI error code, NUL-terminated, into buf (of cap bytes). */
void gb_mpi_error_string(int code, char *buf, int cap) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (cap <= 0) return;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
    if (len >= cap) len = cap - 1;
    memcpy(buf, text, (size_t)len);
    buf[len] = 0;
}

fn main() {
    ginbench::driver::program::<ginbench::alltoall::cli::Config>()
}

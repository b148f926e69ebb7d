fn main() {
    ginbench::driver::program::<ginbench::ep::cli::Config>()
}

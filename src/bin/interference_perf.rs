fn main() {
    ginbench::driver::program::<ginbench::interference::cli::Config>()
}

mod fixture;
mod hostile;
mod preset;
mod run;
mod wire;

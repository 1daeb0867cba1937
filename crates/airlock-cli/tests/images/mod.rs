mod fixture;
mod hostile;
mod run;
mod wire;

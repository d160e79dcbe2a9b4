import { render } from "preact";
import { App } from "./app.tsx";
import "./styles/app.css";

render(<App />, document.getElementById("app")!);

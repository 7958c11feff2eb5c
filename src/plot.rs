//! Charts: per-queue load as grouped bars, drawn with plotters.
//!
//! The format follows the file extension (`.svg` or `.png`, any case);
//! anything else is an error, reported before any work is done
//! ([`ChartFormat::from_path`]). Text is drawn with DejaVu Sans embedded in
//! the binary (`assets/DejaVuSans.ttf`, licence in
//! `assets/DejaVuSans.LICENSE`) and registered as plotters' `sans-serif`, so
//! charts render on machines without any font installed (plotters' ab_glyph
//! backend has no fallback: without a registered font every text fails with
//! `FontUnavailable`, SVG included, as layout needs the metrics).
//!
//! A chart is drawn in memory (an SVG string, or RGB pixels encoded as PNG)
//! and written through `flowsteer_capture::output::OutputFile`: never over
//! one of the command's inputs, and renamed into place only once whole.

use anyhow::{anyhow, bail, Context, Result};
use flowsteer_capture::output::OutputFile;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::io::Write;
use std::path::Path;
use std::sync::OnceLock;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

const SIZE: (u32, u32) = (1000, 560);
const COLORS: [RGBColor; 4] =
    [RGBColor(0x1f, 0x77, 0xb4), RGBColor(0xff, 0x7f, 0x0e), RGBColor(0x2c, 0xa0, 0x2c), RGBColor(0xd6, 0x27, 0x28)];

/// The image formats a chart can be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChartFormat {
    Svg,
    Png,
}

impl ChartFormat {
    /// The format named by `path`'s extension.
    pub fn from_path(path: &Path) -> Result<ChartFormat> {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        match ext.as_str() {
            "svg" => Ok(ChartFormat::Svg),
            "png" => Ok(ChartFormat::Png),
            _ => bail!("{}: unsupported chart format (the file name must end in .svg or .png)", path.display()),
        }
    }
}

/// One bar per queue.
pub struct Series<'a> {
    pub name: &'a str,
    /// Value of queue `i` at index `i`.
    pub values: &'a [u64],
}

/// Writes a bar chart of `series` per queue (side by side when there are
/// several; a legend names them) to `path`, SVG or PNG by its extension.
/// `path` may not be one of `inputs` (the files the command read).
pub fn queue_chart(path: &Path, inputs: &[&Path], title: &str, y_desc: &str, series: &[Series<'_>]) -> Result<()> {
    let format = ChartFormat::from_path(path)?;
    register_font()?;
    let what = || format!("cannot write chart {}", path.display());
    let bytes = match format {
        ChartFormat::Svg => {
            let mut svg = String::new();
            draw(SVGBackend::with_string(&mut svg, SIZE).into_drawing_area(), title, y_desc, series)
                .with_context(what)?;
            svg.into_bytes()
        }
        ChartFormat::Png => {
            let mut rgb = vec![0u8; SIZE.0 as usize * SIZE.1 as usize * 3];
            draw(BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area(), title, y_desc, series)
                .with_context(what)?;
            let mut png = Vec::new();
            let mut encoder = png::Encoder::new(&mut png, SIZE.0, SIZE.1);
            encoder.set_color(png::ColorType::Rgb);
            encoder.set_depth(png::BitDepth::Eight);
            encoder.write_header().and_then(|mut w| w.write_image_data(&rgb)).with_context(what)?;
            png
        }
    };
    let mut file = OutputFile::create(path, inputs)?;
    file.write_all(&bytes).with_context(what)?;
    file.commit()?;
    Ok(())
}

fn register_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok());
    if ok {
        Ok(())
    } else {
        bail!("the embedded chart font could not be loaded")
    }
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    y_desc: &str,
    series: &[Series<'_>],
) -> Result<()> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("{e}");
    root.fill(&WHITE).map_err(e)?;
    let queues = series.iter().map(|s| s.values.len()).max().unwrap_or(0).max(1);
    // Headroom above the tallest bar for the legend.
    let headroom = if series.len() > 1 { 1.3 } else { 1.1 };
    let top = series.iter().flat_map(|s| s.values.iter().copied()).max().unwrap_or(0).max(1) as f64 * headroom;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..queues as f64 - 0.5, 0f64..top)
        .map_err(e)?;
    let x_label = |x: &f64| if (x - x.round()).abs() < 1e-6 { format!("{}", x.round() as i64) } else { String::new() };
    let y_label = |y: &f64| human(*y);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(queues.min(32) + 1)
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .x_desc("queue")
        .y_desc(y_desc)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(e)?;
    let width = 0.8 / series.len().max(1) as f64;
    for (s, (ser, color)) in series.iter().zip(COLORS.iter().cycle()).enumerate() {
        let left = |q: usize| q as f64 - 0.4 + s as f64 * width;
        let bars = ser
            .values
            .iter()
            .enumerate()
            .map(|(q, &v)| Rectangle::new([(left(q), 0.0), (left(q) + width * 0.95, v as f64)], color.filled()));
        chart
            .draw_series(bars)
            .map_err(e)?
            .label(ser.name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
    }
    if series.len() > 1 {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font(("sans-serif", 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(e)?;
    }
    root.present().map_err(e)?;
    Ok(())
}

/// 1234567 -> "1.23M".
fn human(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// One bar per category, f64 values; `None` draws no bar.
pub struct RateSeries<'a> {
    pub name: &'a str,
    /// Value of category `i` at index `i`.
    pub values: &'a [Option<f64>],
}

/// Writes a grouped bar chart of `series` over named categories (frame
/// sizes, say) to `path`, SVG or PNG by its extension.
pub fn category_chart(
    path: &Path,
    title: &str,
    x_desc: &str,
    categories: &[String],
    y_desc: &str,
    series: &[RateSeries<'_>],
) -> Result<()> {
    let format = ChartFormat::from_path(path)?;
    register_font()?;
    let what = || format!("cannot write chart {}", path.display());
    let args = (title, x_desc, categories, y_desc, series);
    let bytes = match format {
        ChartFormat::Svg => {
            let mut svg = String::new();
            draw_categories(SVGBackend::with_string(&mut svg, SIZE).into_drawing_area(), args).with_context(what)?;
            svg.into_bytes()
        }
        ChartFormat::Png => {
            let mut rgb = vec![0u8; SIZE.0 as usize * SIZE.1 as usize * 3];
            draw_categories(BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area(), args).with_context(what)?;
            let mut png = Vec::new();
            let mut encoder = png::Encoder::new(&mut png, SIZE.0, SIZE.1);
            encoder.set_color(png::ColorType::Rgb);
            encoder.set_depth(png::BitDepth::Eight);
            encoder.write_header().and_then(|mut w| w.write_image_data(&rgb)).with_context(what)?;
            png
        }
    };
    let mut file = OutputFile::create(path, &[])?;
    file.write_all(&bytes).with_context(what)?;
    file.commit()?;
    Ok(())
}

type CategoryArgs<'a> = (&'a str, &'a str, &'a [String], &'a str, &'a [RateSeries<'a>]);

fn draw_categories<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, args: CategoryArgs<'_>) -> Result<()> {
    let (title, x_desc, categories, y_desc, series) = args;
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("{e}");
    root.fill(&WHITE).map_err(e)?;
    let n = categories.len().max(1);
    let top = series.iter().flat_map(|s| s.values.iter().flatten().copied()).fold(1.0f64, f64::max) * 1.3;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..top)
        .map_err(e)?;
    let x_label = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            categories.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let y_label = |y: &f64| human(*y);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(e)?;
    let width = 0.8 / series.len().max(1) as f64;
    for (s, (ser, color)) in series.iter().zip(COLORS.iter().cycle()).enumerate() {
        let left = |q: usize| q as f64 - 0.4 + s as f64 * width;
        let bars = ser.values.iter().enumerate().filter_map(|(q, v)| {
            v.map(|v| Rectangle::new([(left(q), 0.0), (left(q) + width * 0.95, v)], color.filled()))
        });
        chart
            .draw_series(bars)
            .map_err(e)?
            .label(ser.name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_by_extension() {
        assert_eq!(ChartFormat::from_path(Path::new("a/b.SVG")).unwrap(), ChartFormat::Svg);
        assert_eq!(ChartFormat::from_path(Path::new("x.png")).unwrap(), ChartFormat::Png);
        let err = ChartFormat::from_path(Path::new("x.jpg")).unwrap_err().to_string();
        assert!(err.contains("x.jpg") && err.contains(".svg"), "{err}");
        assert!(ChartFormat::from_path(Path::new("noext")).is_err());
    }

    #[test]
    fn svg_and_png_render_with_the_embedded_font() {
        let dir = std::env::temp_dir().join(format!("flowsteer-plot-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let outer = [10, 0, 0, 0];
        let inner = [3, 2, 3, 2];
        let series = [Series { name: "outer", values: &outer }, Series { name: "inner", values: &inner }];
        for name in ["q.svg", "q.png"] {
            let path = dir.join(name);
            queue_chart(&path, &[], "test chart", "packets", &series).unwrap();
            assert!(std::fs::metadata(&path).unwrap().len() > 1000, "{name}");
        }
        let svg = std::fs::read_to_string(dir.join("q.svg")).unwrap();
        assert!(svg.contains("test chart"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn human_numbers() {
        assert_eq!(human(950.0), "950");
        assert_eq!(human(25_000.0), "25.0k");
        assert_eq!(human(2_500_000.0), "2.50M");
    }
}
